import Foundation
import FriensoProto
import FriensoTesting
import GRDB
import Synchronization
import Testing
import Wire

/// The web app the edge serves at `/`, in Debian's chromium through WebDriver: two people in two
/// windows, each seeing only what they may.
@Suite("end to end: the web app in a real browser", .serialized, .timeLimit(.minutes(4)))
struct WebAppEndToEndTests {
    /// Where screenshots go: `.build/test-output/` (not committed).
    static let output = Repository.root.appendingPathComponent(".build/test-output").path

    @Test func twoPeople_seeEachOtherMoveLive_onlyWhomTheyMay_andAHelpNowBanner() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let stack = try await LaunchedStack(procs, environment: ["FRIENSO_OPERATOR_KEY": "web-operator"])
        defer { stack.shutdown() }
        try FileManager.default.createDirectory(atPath: Self.output, withIntermediateDirectories: true)
        try await stack.showingLogsOnFailure {
            let edge = stack.edge
            // The campus, so the map has outlines to draw.
            let campus = try Data(contentsOf: Repository.root.appendingPathComponent("deploy/data/campus.geojson")).base64EncodedString()
            let imported = try await HTTP.post("\(edge)/v1/geo/ImportPlaces", json: #"{"operatorKey": "web-operator", "format": "geojson", "data": "\#(campus)"}"#)
            try #require(imported.status == 200, "\(imported.text)")

            let ana = try await WebUser.register("ana", number: 31, edge: edge)
            let ben = try await WebUser.register("ben", number: 32, edge: edge)
            let cyd = try await WebUser.register("cyd", number: 33, edge: edge)
            try await ana.befriend(ben)
            // ana is in ben's core circle: his helpNow reaches her.
            _ = try await ben.ok("social/AddToCircle", #"{"userId": "\#(ana.id)"}"#)
            _ = try await ana.ok("social/RespondToCircleRequest", #"{"ownerUserId": "\#(ben.id)", "action": "REQUEST_ACTION_ACCEPT"}"#)
            try await ana.moves(to: 33.7774)
            try await ben.moves(to: 33.7780)
            try await cyd.moves(to: 33.7776) // a stranger next to ana: never on her page

            let driver = try await WebDriver.start(procs)
            let anaPage = try await driver.browser()
            let benPage = try await driver.browser()
            // Closed before the harness stops chromedriver (its browsers would outlive it).
            do {
                try await browse(anaPage, benPage, ana: ana, ben: ben, cyd: cyd, edge: edge)
                try await aReadWaitsOutAStoppedService(anaPage, stack: stack)
                try await forgetThenLeave(benPage, cyd: cyd, stack: stack)
            } catch {
                await anaPage.quit()
                await benPage.quit()
                throw error
            }
            await anaPage.quit()
            await benPage.quit()
        }
    }

    /// A read from the page while alerts is stopped (as a restarting service looks to the
    /// gateway: 503 UNAVAILABLE) is sent again by the app, which says so (`frienso:retrying`),
    /// and is answered once alerts runs again; before, the page showed the 503 at once.
    private func aReadWaitsOutAStoppedService(_ page: Browser, stack: LaunchedStack) async throws {
        let alerts = try #require(stack.pid(of: "alerts"))
        kill(alerts, SIGSTOP)
        var stopped = true
        defer { if stopped { kill(alerts, SIGCONT) } }
        try await eventually("alerts (PID \(alerts)) is stopped", timeout: .seconds(10)) { ProcessState.of(alerts) == "T" }
        try await eventually("the edge answers 503 for alerts") {
            try await HTTP.post("\(stack.edge)/v1/alerts/Ping", json: "{}").status == 503
        }
        _ = try await page.run("""
            window.__retries = 0; window.__read = null;
            window.addEventListener("frienso:retrying", () => { window.__retries += 1; });
            import("/js/api.js").then((api) => api.call("alerts.GetWatch"))
              .then(() => { window.__read = "answered"; }, (error) => { window.__read = `${error.name}: ${error.message}`; });
            """)
        try await eventually("the page met the stopped service and tries again") {
            if case .number(let tries) = try await page.run("return window.__retries") { return tries > 0 }
            return false
        }
        #expect(try await page.run("return window.__read") == .null, "the read ended while alerts was stopped")
        kill(alerts, SIGCONT)
        stopped = false
        try await eventually("the read is answered once alerts runs") { try await page.run("return window.__read") != .null }
        #expect(try await page.run("return window.__read") == .string("answered"))
    }

    private func browse(_ anaPage: Browser, _ benPage: Browser, ana: WebUser, ben: WebUser, cyd: WebUser, edge: String) async throws {
        for (page, user) in [(anaPage, ana), (benPage, ben)] {
            try await page.go(edge)
            try await page.type("#login-form [name=login]", user.name)
            try await page.type("#login-form [name=password]", "password \(user.name) 1")
            try await page.click("#login-form button[type=submit]")
            try await page.waitFor("#home:not([hidden])")
        }

        // ana sees ben on her map, and his label; the campus is drawn.
        let marker = "#map [data-user-id=\"\(ben.id)\"]"
        try await anaPage.waitFor(marker)
        try await anaPage.waitFor("#map [data-place=\"University Library\"]")
        #expect(try await anaPage.text("#friends").contains("Ben Web"))
        // ben walks; ana's page follows without a reload (the page object survives).
        try await anaPage.run("window.__samePage = true")
        try await ben.moves(to: 33.7791)
        try await eventually("ana's map shows ben's new position", timeout: .seconds(10)) {
            try await anaPage.attribute(marker, "data-lat") == "33.7791"
        }
        #expect(try await anaPage.run("return window.__samePage === true") == .bool(true), "no reload")
        // Never a person she may not see.
        #expect(try await anaPage.element("#map [data-user-id=\"\(cyd.id)\"]") == nil)
        #expect(!(try await anaPage.text("#friends").contains("Cyd")))
        try await anaPage.screenshot(to: "\(Self.output)/webapp-map.png")

        // ben raises helpNow from his page (with the confirmation step); ana's page shows the banner.
        // His phone's GPS (the browser's geolocation, stood in for: a headless browser has no
        // position) puts him at the Student Union, not by Pyramid Arena where he last shared:
        // the alert says where he is as he raises it.
        _ = try await benPage.run(#"navigator.geolocation.getCurrentPosition = (ok) => ok({ coords: { latitude: 33.781, longitude: -118.113, accuracy: 8 }, timestamp: Date.now() });"#)
        try await benPage.click("#help")
        try await benPage.waitFor("#help-confirm:not([hidden])")
        let pressed = ContinuousClock.now
        try await benPage.click("#help-yes")
        try await anaPage.waitFor("#banner:not([hidden])", timeout: .seconds(10))
        let shownAfter = pressed.duration(to: .now)
        #expect(try await anaPage.text("#banner").contains("Ben Web (@ben) needs help"))
        #expect(try await anaPage.text("#banner").contains("Last location near Student Union (33.78100,-118.11300)"))
        print("web app: the helpNow banner appeared on ana's page \(shownAfter) after ben confirmed (includes WebDriver's own round trips)")
        try await anaPage.screenshot(to: "\(Self.output)/webapp-helpnow.png")
        #expect(try await benPage.text("#help-status").contains("Your circle was alerted"))
        // Still nobody ana may not see, even with the alert's location grants.
        #expect(try await anaPage.element("#map [data-user-id=\"\(cyd.id)\"]") == nil)
        try await zoneAndPlaceAlert(anaPage, benPage, ana: ana, ben: ben)
    }

    /// ana makes a privacy zone where she is and allows ben place alerts; ben then reads "Home"
    /// for her, not a point on his map, sets an alert on her Home, and is told when she leaves.
    private func zoneAndPlaceAlert(_ anaPage: Browser, _ benPage: Browser, ana: WebUser, ben: WebUser) async throws {
        try await anaPage.click("[data-tab=privacy]")
        let allowBen = "#place-alert-allowed input[data-user-id=\"\(ben.id)\"]"
        try await anaPage.waitFor(allowBen)
        try await anaPage.type("#zone-form [name=label]", "Home")
        try await anaPage.click("#zone-form button[type=submit]")
        try await eventually("ana's zone is listed") { try await anaPage.text("#zones").contains("Home") }
        try await anaPage.click(allowBen)
        try await eventually("ana allows ben") { (try? await ben.call("geo/ListPlaceAlertTargets", #"{"subjectId": "\#(ana.id)"}"#).0) == 200 }
        try await ana.moves(to: 33.7774) // inside her zone
        try await eventually("ben reads Home for ana", timeout: .seconds(10)) { try await benPage.text("#friends").contains("Home") }
        #expect(try await benPage.element("#map [data-user-id=\"\(ana.id)\"]") == nil, "no point for her on his map")

        _ = try await benPage.run("window.scrollTo(0, 0)") // the helpNow button left his page scrolled under the header
        try await benPage.click("[data-tab=privacy]")
        try await benPage.waitFor("#place-alert-form [name=subject] option[value=\"\(ana.id)\"]")
        _ = try await benPage.run("""
            const s = document.querySelector('#place-alert-form [name=subject]'); s.value = '\(ana.id)'; s.dispatchEvent(new Event('change'));
            """)
        try await benPage.waitFor("#place-alert-form [name=target] option[value^=zone]")
        try await benPage.click("#place-alert-form [name=leave]")
        try await benPage.click("#place-alert-form button[type=submit]")
        try await eventually("ben's alert is listed") { try await benPage.text("#place-alerts").contains("Home") }
        try await ana.moves(to: 33.7900) // 1.4 km away: she left
        try await eventually("ben is told ana left Home", timeout: .seconds(10)) {
            try await benPage.text("#help-status").contains("Ana Web left Home")
        }
        try await benPage.screenshot(to: "\(Self.output)/webapp-place-alert.png")
    }

    /// On ben's page, after he logs out: cyd forgot her password, gets a code by email (what the
    /// recording provider sent), sets a new one, logs in with it, and deletes her account.
    private func forgetThenLeave(_ page: Browser, cyd: WebUser, stack: LaunchedStack) async throws {
        try await page.click("#logout")
        try await page.waitFor("#signin:not([hidden])")
        try await page.type("#reset-form [name=login]", "cyd")
        try await page.click("#reset-form button[type=submit]")
        try await eventually("the page says a code is on its way", timeout: .seconds(10)) {
            try await page.text("#reset-form [data-note]").contains("a code is on its way")
        }
        let found = Mutex("")
        try await eventually("the reset email went out", timeout: .seconds(15)) {
            let body = try stack.database("accounts").read { db in
                try String.fetchOne(db, sql: "SELECT body FROM sent_emails WHERE address = 'cyd@edge.example'")
            }
            let code = body?.split(separator: "\n").first { $0.hasPrefix("Your code: ") }.map { String($0.dropFirst(11)) } ?? ""
            found.withLock { $0 = code }
            return !code.isEmpty
        }
        let code = found.withLock { $0 }
        try await page.type("#reset-form [name=code]", code)
        try await page.type("#reset-form [name=newPassword]", "cyd's new passphrase 2")
        try await page.click("#reset-submit")
        try await eventually("the page says the password changed", timeout: .seconds(10)) {
            try await page.text("#reset-form [data-note]").contains("Your password is changed")
        }
        try await page.type("#login-form [name=password]", "cyd's new passphrase 2")
        try await page.click("#login-form button[type=submit]")
        try await page.waitFor("#home:not([hidden])")
        #expect(try await page.text("#me").contains("Cyd"))
        // Her old session (from before the reset) is over.
        #expect(try await cyd.call("accounts/WhoAmI").0 == 401)

        try await page.click("[data-tab=account]")
        try await page.type("#delete-form [name=confirm]", "cyd")
        try await page.type("#delete-form [name=password]", "cyd's new passphrase 2")
        try await page.click("#delete-form button[type=submit]")
        try await page.waitFor("#signin:not([hidden])")
        #expect(try await page.text("#login-form [data-note]").contains("Your account is deleted"))
        let login = try await HTTP.post("\(stack.edge)/v1/accounts/Login", json: #"{"login": "cyd", "password": "cyd's new passphrase 2"}"#)
        #expect(login.status == 401, "\(login.text)")
    }
}
