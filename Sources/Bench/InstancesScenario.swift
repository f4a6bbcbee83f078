import Accounts
import Foundation
public import Logging
import PostgresHarness
import Storage
import Wire

/// `instances`: accounts on PostgreSQL as one instance and as two (each with its own pool,
/// context and reactor, as two processes have), on one database, in one run; the client is
/// given every instance and spreads its calls over them. The load is `accounts`' (reads, and
/// durable writes whose profile event goes to the database's event log).
///
/// On one machine the instances share its cores (and PostgreSQL's): the point is what a second
/// instance costs (the event log's relays, a second pool), not that it doubles the rate.
public enum InstancesScenario {
    public static func run(_ options: EngineScenarioOptions, counts: [Int], logger: Logger) async throws -> String {
        var quiet = logger
        quiet.logLevel = .warning
        let server = try await Task.detached { try LocalPostgresServer.start(prefix: "frienso-bench-pg") }.value
        defer { server.stop() }
        var rows: [LatencyStats] = []
        for count in counts {
            let settings = try PostgresSettings(url: server.url(database: try server.createDatabase("bench")), schema: "accounts")
            var databases: [PostgresServiceDatabase] = []
            do {
                for _ in 0..<count { databases.append(try await PostgresServiceDatabase.open(settings, logger: quiet)) }
                let pools = databases, label = Self.label(count)
                rows += try await EngineComparison.behindHosts("accounts", label: label, count: count, logger: quiet) { index, events, context, reactor in
                    try await AccountsService.open(.postgres(pools[index]), config: BenchStack.accountsConfig(), events: events).makeHost(
                        options: HostOptions(name: "accounts", endpoint: "tcp://127.0.0.1:*"), logger: quiet, context: context, reactor: reactor)
                } load: { client, clientReactor in
                    try await AccountsScenario.load(label: label, client: client, clientReactor: clientReactor, options: options)
                }
            } catch {
                for database in databases { await database.close() }
                throw error
            }
            for database in databases { await database.close() }
        }
        return report(rows, counts: counts, inFlight: options.inFlight)
    }

    static func label(_ count: Int) -> String { count == 1 ? "1 instance" : "\(count) instances" }

    /// The rows, then each operation's ratio of every count to the first.
    static func report(_ rows: [LatencyStats], counts: [Int], inFlight: [Int]) -> String {
        var out = [Report.table(rows)]
        guard let base = counts.first else { return out.joined(separator: "\n") }
        let prefix = "\(label(base)): "
        for name in Set(rows.filter { $0.name.hasPrefix(prefix) }.map { String($0.name.dropFirst(prefix.count)) }).sorted() {
            for count in counts.dropFirst() {
                for n in inFlight {
                    guard let one = rows.first(where: { $0.name == prefix + name && $0.inFlight == n }),
                          let more = rows.first(where: { $0.name == "\(label(count)): \(name)" && $0.inFlight == n }) else { continue }
                    out.append("- \(name), \(n) in flight: \(label(count)) / \(label(base)) throughput "
                               + "\(String(format: "%.2f", more.throughput / max(one.throughput, 1)))×, p99 \(String(format: "%.2f", more.micros(99) / max(one.micros(99), 1)))×")
                }
            }
        }
        return out.joined(separator: "\n")
    }
}
