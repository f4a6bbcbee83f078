import Foundation
import FriensoProto
import FriensoTesting
import Launcher
import Logging
import ServiceKit
import Testing
import Wire

/// The deployment's metrics as an operator sees them: Debian's real Prometheus scrapes the
/// launcher's `/metrics` (every member's metrics, merged), loads `deploy/prometheus`'s rules, and
/// answers queries for the request counters and a latency quantile. Only the launcher may read a
/// member's metrics.
@Suite("end to end: metrics and Prometheus", .serialized, .timeLimit(.minutes(4)))
struct MetricsEndToEndTests {
    static let prometheus = "/usr/bin/prometheus"
    static let promtool = "/usr/bin/promtool"

    @Test func prometheusScrapesTheLauncher_andAnswersForRequestCountersAndALatencyQuantile() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.prometheus),
                     "no \(Self.prometheus): deploy/install-deps --for-tests installs Debian's prometheus")
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let stack = try await LaunchedStack(procs)
        defer { stack.shutdown() }
        try await stack.showingLogsOnFailure {
            let metricsURL = try await eventuallyValue("status.json names the metrics endpoint", timeout: .seconds(20)) {
                try? LaunchStatus.read(stack.run).metricsEndpoint
            }
            // Traffic: one registration (a write, a group commit) and pings through the gateway.
            let register = try await stack.cli("mia").run([
                "register", "--username", "mia", "--email", "mia@example.org", "--phone", "+15625550142",
                "--first-name", "Mia", "--last-name", "Metrics", "--password-stdin"], stdin: "mia's long password\n")
            #expect(register.status == 0, "\(register.output)")
            let client = stack.client()
            for _ in 0..<25 { _ = try await client.ping("accounts", deadline: .seconds(2)) }
            await client.close()

            // What the launcher serves passes Prometheus's own linter, and carries no personal data.
            let served = try await HTTP.get(metricsURL)
            #expect(served.status == 200 && served.header("Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true)
            let lint = try await ProcessHarness.run(Self.promtool, ["check", "metrics"], stdin: served.text)
            #expect(lint.status == 0, "promtool check metrics: \(lint.output)")
            for member in LaunchedStack.services {
                #expect(served.text.contains("frienso_member_up{service=\"\(member)\"} 1"), "\(member) not read:\n\(served.text.prefix(3_000))")
            }
            #expect(served.text.contains("frienso_batch_frames_total"), "each host counts the batch frames it takes and sends")
            for personal in ["mia", "example.org", "5550142", "user_id", "user="] {
                #expect(!served.text.contains(personal), "the metrics carry \(personal)")
            }

            // The real Prometheus, on a free port, with the shipped rules.
            let dir = procs.workDirectory
            let target = try #require(URL(string: metricsURL).flatMap { u in u.port.map { "\(u.host ?? "127.0.0.1"):\($0)" } })
            var reserved: DeadPort? = try DeadPort()
            let web = reserved!.endpoint.replacingOccurrences(of: "tcp://", with: "")
            let rules = Repository.root.appendingPathComponent("deploy/prometheus/frienso-rules.yml").path
            try """
                global:
                  scrape_interval: 1s
                  evaluation_interval: 1s
                rule_files:
                  - \(rules)
                scrape_configs:
                  - job_name: frienso
                    static_configs:
                      - targets: ["\(target)"]
                """.write(toFile: "\(dir)/prometheus.yml", atomically: true, encoding: .utf8)
            reserved = nil
            try procs.start("prometheus", executable: Self.prometheus, arguments: [
                "--config.file=\(dir)/prometheus.yml", "--storage.tsdb.path=\(dir)/prometheus-data",
                "--web.listen-address=\(web)", "--log.level=warn"])
            try await eventually("Prometheus is ready", timeout: .seconds(60)) {
                (try? await HTTP.get("http://\(web)/-/ready", timeout: .seconds(2)))?.status == 200
            }
            @Sendable func query(_ promQL: String) async throws -> [Double] {
                let encoded = promQL.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? promQL
                let reply = try await HTTP.get("http://\(web)/api/v1/query?query=\(encoded)", timeout: .seconds(5))
                guard reply.status == 200,
                      let object = try JSONSerialization.jsonObject(with: Data(reply.body)) as? [String: Any],
                      let data = object["data"] as? [String: Any], let result = data["result"] as? [[String: Any]] else { return [] }
                return result.compactMap { ($0["value"] as? [Any])?.last as? String }.compactMap(Double.init)
            }
            try await eventually("Prometheus has the accounts Ping counter", timeout: .seconds(30)) {
                try await query(#"sum(frienso_requests_total{service="accounts",method="accounts.Ping",status="OK"})"#).first ?? 0 >= 25
            }
            let registered = try await query(#"sum(frienso_requests_total{service="accounts",method="accounts.Register",status="OK"})"#)
            #expect(registered == [1], "\(registered)")
            let up = try await query("sum(frienso_member_up)")
            #expect(up == [Double(LaunchedStack.services.count)], "\(up)")
            // A latency quantile from the histogram (over everything recorded, since the pings
            // were made before Prometheus started): a positive, finite number of seconds.
            let p99 = try await eventuallyValue("a p99 for the gateway's forwarded Pings", timeout: .seconds(30)) {
                try await query(#"histogram_quantile(0.99, sum by (le) (frienso_request_duration_seconds_bucket{service="gateway",method="accounts.Ping"}))"#)
                    .first.flatMap { $0.isFinite && $0 > 0 ? $0 : nil }
            }
            #expect(p99 < 10, "\(p99)")
            // CPU and memory per member, and the rules loaded.
            let memory = try await query("min(process_resident_memory_bytes)")
            #expect((memory.first ?? 0) > 1_000_000, "\(memory)")
            let rulesReply = try await HTTP.get("http://\(web)/api/v1/rules?type=alert")
            for alert in ["FriensoServiceDown", "FriensoOutboxBackingUp", "FriensoHelpNowDeliveriesFailing"] {
                #expect(rulesReply.text.contains("\"name\":\"\(alert)\""), "\(rulesReply.text.prefix(2_000))")
            }
        }
    }

    /// Only the launcher reads metrics: another member's key is refused by the policy, the
    /// launcher's key without the scrape token by the host, and the gateway's and the edge's
    /// client-facing doors without the token too.
    @Test func onlyTheLauncherReadsAMembersMetrics() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let stack = try await LaunchedStack(procs)
        defer { stack.shutdown() }
        try await stack.showingLogsOnFailure {
            let launcher = InternalPlane(keyring: try KeyringFiles.load(at: stack.keyring, member: "launcher"))
            let geo = InternalPlane(keyring: try KeyringFiles.load(at: stack.keyring, member: "geo"))
            let logger = Logger(label: "metrics-e2e")
            let token = try #require(launcher.scrapeToken(member: "accounts"))
            func call(_ plane: InternalPlane, _ member: String, at endpoint: String, token: [UInt8]) async -> Result<String, RPCError> {
                guard let client = try? plane.client(member, at: endpoint, logger: logger) else { return .failure(.internal("no client")) }
                defer { Task { await client.close() } }
                do throws(RPCError) {
                    return .success(try await client.call(CommonMethods.metrics(member), CommonV1.MetricsRequest(token: token),
                                                          options: CallOptions(deadline: .seconds(3))).exposition)
                } catch {
                    return .failure(error)
                }
            }
            let accounts = stack.endpoints["accounts"]!
            let ok = await call(launcher, "accounts", at: accounts, token: token)
            #expect((try? ok.get())?.contains("frienso_requests_total") == true, "\(ok)")
            // geo's key, even with the right token: the policy refuses it.
            let asGeo = await call(geo, "accounts", at: accounts, token: token)
            #expect(asGeo.failure?.code == .permissionDenied, "\(asGeo)")
            // The launcher's key with a wrong token.
            let wrong = await call(launcher, "accounts", at: accounts, token: token.map { $0 ^ 1 })
            #expect(wrong.failure?.code == .permissionDenied, "\(wrong)")

            // The gateway's client socket: anyone connects, only the token answers.
            let client = stack.client()
            defer { Task { await client.close() } }
            let anonymous: Result<CommonV1.MetricsResponse, RPCError>
            do throws(RPCError) {
                anonymous = .success(try await client.call(CommonMethods.metrics("gateway"), CommonV1.MetricsRequest()))
            } catch {
                anonymous = .failure(error)
            }
            #expect(anonymous.failure?.code == .permissionDenied, "\(anonymous)")

            // The edge: 403 without the bearer token, the metrics with it.
            let bare = try await HTTP.get("\(stack.edge)/metrics")
            #expect(bare.status == 403, "\(bare.status) \(bare.text)")
            let edgeToken = Hex.encode(try #require(launcher.scrapeToken(member: "edge")))
            let proven = try await HTTP.get("\(stack.edge)/metrics", headers: [("Authorization", "Bearer \(edgeToken)")])
            #expect(proven.status == 200 && proven.text.contains("frienso_http_requests_total"), "\(proven.status)")

            // A WebSocket open on the edge is a live subscriber in the launcher's metrics.
            let metricsURL = try await eventuallyValue("status.json names the metrics endpoint", timeout: .seconds(20)) {
                try? LaunchStatus.read(stack.run).metricsEndpoint
            }
            let web = try await WebUser.register("mila", number: 31, edge: stack.edge)
            let socket = LiveSocket(stack.edge.replacingOccurrences(of: "http://", with: "ws://") + "/v1/events",
                                    headers: [("Authorization", "Bearer \(web.token)")])
            #expect(await socket.next("hello") != nil)
            try await eventually("the edge counts its WebSocket", timeout: .seconds(10)) {
                try await HTTP.get(metricsURL).text.contains(#"frienso_event_subscribers{service="edge"} 1"#)
            }
            _ = await socket.close()
        }
    }

    /// The alerting rules shipped in deploy/prometheus fire as their unit tests say
    /// (`promtool test rules`), and the scrape config is valid.
    @Test func theShippedRulesAndScrapeConfigPassPromtool() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.promtool),
                     "no \(Self.promtool): deploy/install-deps --for-tests installs Debian's prometheus")
        let dir = Repository.root.appendingPathComponent("deploy/prometheus").path
        let config = try await ProcessHarness.run(Self.promtool, ["check", "config", "prometheus.yml"], directory: dir)
        #expect(config.status == 0, "\(config.output)")
        let rules = try await ProcessHarness.run(Self.promtool, ["test", "rules", "frienso-rules.test.yml"], directory: dir)
        #expect(rules.status == 0 && rules.output.contains("SUCCESS"), "\(rules.output)")
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
