import Foundation
public import FriensoProto

/// Debian's chromium driven through chromedriver's W3C WebDriver API, for the web app's tests:
/// real pages, real JavaScript, real WebSockets. Started by `start` on a free port; each
/// `Browser` is its own headless window and profile.
public final class WebDriver: Sendable {
    public static let chromium = "/usr/bin/chromium"
    public static let chromedriver = "/usr/bin/chromedriver"
    let base: String
    let profiles: String

    /// - Throws: when chromium or chromedriver is not installed (`deploy/install-deps --for-tests`).
    public static func start(_ procs: ProcessHarness) async throws -> WebDriver {
        guard FileManager.default.isExecutableFile(atPath: chromium), FileManager.default.isExecutableFile(atPath: chromedriver) else {
            throw Missing()
        }
        // A port this process hands out once, released (closed) before chromedriver binds it.
        let endpoint = try { try DeadPort().endpoint }().replacingOccurrences(of: "tcp://", with: "http://")
        let number = endpoint.split(separator: ":").last.map(String.init) ?? "0"
        let driver = WebDriver(base: endpoint, profiles: "\(procs.workDirectory)/browser-profiles")
        _ = try procs.start("chromedriver", executable: chromedriver, arguments: ["--port=\(number)", "--allowed-ips=127.0.0.1"])
        try await eventually("chromedriver answers", timeout: .seconds(30)) {
            (try? await HTTP.get("\(endpoint)/status").status) == 200
        }
        return driver
    }

    struct Missing: Error, CustomStringConvertible {
        var description: String { "chromium and chromium-driver are not installed: run deploy/install-deps --for-tests (deploy/test does)" }
    }

    init(base: String, profiles: String) {
        self.base = base
        self.profiles = profiles
    }

    /// A new headless window, phone-sized by default.
    public func browser(width: Int = 390, height: Int = 844) async throws -> Browser {
        let profile = "\(profiles)/\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: profile, withIntermediateDirectories: true)
        let capabilities = JSONValue.object([("capabilities", .object([("alwaysMatch", .object([
            ("browserName", .string("chrome")),
            ("goog:chromeOptions", .object([
                ("binary", .string(Self.chromium)),
                ("args", .array(["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                                 "--window-size=\(width),\(height)", "--user-data-dir=\(profile)"].map(JSONValue.string))),
            ])),
        ]))]))])
        let reply = try await send("POST", "/session", capabilities)
        guard case .string(let id)? = reply["sessionId"] else { throw WebDriverError("no session: \(reply.rendered())") }
        return Browser(driver: self, id: id)
    }

    @discardableResult
    func send(_ method: String, _ path: String, _ body: JSONValue? = nil) async throws -> JSONValue {
        let reply = try await HTTP.send(method, base + path, headers: [("Content-Type", "application/json")],
                                        body: body.map { Array($0.rendered().utf8) })
        let json = try reply.json()
        guard reply.status == 200 else { throw WebDriverError("\(method) \(path): \(reply.status) \(json["value"]?["message"]?.rendered() ?? reply.text)") }
        return json["value"] ?? .null
    }
}

public struct WebDriverError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// One browser window.
public struct Browser: Sendable {
    let driver: WebDriver
    let id: String
    static let elementKey = "element-6066-11e4-a52e-4f735466cecf"

    public func go(_ url: String) async throws {
        try await driver.send("POST", "/session/\(id)/url", .object([("url", .string(url))]))
    }

    /// The element `css` selects, if there is one now.
    public func element(_ css: String) async throws -> String? {
        let found = try await driver.send("POST", "/session/\(id)/elements", .object([("using", .string("css selector")), ("value", .string(css))]))
        guard case .array(let items) = found, case .string(let element)? = items.first?[Self.elementKey] else { return nil }
        return element
    }

    /// Waits (bounded) for `css` to select an element. - Returns: it.
    @discardableResult
    public func waitFor(_ css: String, timeout: Duration = .seconds(10)) async throws -> String {
        try await eventuallyValue("\(css) on the page", timeout: timeout) { try await element(css) }
    }

    /// Waits (bounded) for `css` to select an element a person could use now: displayed and
    /// enabled. In the page is not enough: a form the app is still showing refuses keys with
    /// "element not interactable" (a CI run failed so, typing into one). - Returns: it.
    @discardableResult
    public func waitForUsable(_ css: String, timeout: Duration = .seconds(10)) async throws -> String {
        try await eventuallyValue("\(css) displayed and enabled", timeout: timeout) {
            guard let element = try await element(css),
                  case .bool(true) = try await driver.send("GET", "/session/\(id)/element/\(element)/displayed"),
                  case .bool(true) = try await driver.send("GET", "/session/\(id)/element/\(element)/enabled") else { return nil }
            return element
        }
    }

    public func click(_ css: String) async throws {
        let element = try await waitForUsable(css)
        try await driver.send("POST", "/session/\(id)/element/\(element)/click", .object([]))
    }

    public func type(_ css: String, _ text: String) async throws {
        let element = try await waitForUsable(css)
        try await driver.send("POST", "/session/\(id)/element/\(element)/value", .object([("text", .string(text))]))
    }

    public func text(_ css: String) async throws -> String {
        let element = try await waitFor(css)
        guard case .string(let text) = try await driver.send("GET", "/session/\(id)/element/\(element)/text") else { return "" }
        return text
    }

    public func attribute(_ css: String, _ name: String) async throws -> String? {
        guard let element = try await element(css) else { return nil }
        guard case .string(let value) = try await driver.send("GET", "/session/\(id)/element/\(element)/attribute/\(name)") else { return nil }
        return value
    }

    /// Runs `script` in the page. - Returns: what it returned.
    @discardableResult
    public func run(_ script: String) async throws -> JSONValue {
        try await driver.send("POST", "/session/\(id)/execute/sync", .object([("script", .string(script)), ("args", .array([]))]))
    }

    /// Writes a PNG of the window to `path`.
    public func screenshot(to path: String) async throws {
        guard case .string(let base64) = try await driver.send("GET", "/session/\(id)/screenshot"), let data = Data(base64Encoded: base64) else {
            throw WebDriverError("no screenshot")
        }
        try data.write(to: URL(fileURLWithPath: path))
    }

    public func quit() async {
        _ = try? await driver.send("DELETE", "/session/\(id)")
    }
}
