public import FriensoProto
import GRDB
import Storage
public import Wire

/// Erasing a deleted account (accounts calls `EraseUser` until it succeeds): the person's watch
/// sessions and helpNow alerts with their recipients and prompts, their answers in other
/// people's, grants either way, devices, dismissed circle requests, every delivery to them or
/// about them (with what the recording provider kept of it), and kept replies; one transaction.
extension AlertsService {
    public func eraseUser(_ request: AlertsV1.EraseUserRequest, _ context: RequestContext) async throws -> AlertsV1.EraseUserResponse {
        try Erasure.check(user: request.userId, traces: request.traces)
        guard request.addresses.count <= 8, request.addresses.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 320 }) else {
            throw RPCError.invalidArgument("addresses: at most 8, each 1-320 bytes")
        }
        let erased = try await store.erase(request.userId, addresses: request.addresses, traces: request.traces)
        try await Erasure.finish(store.database, user: request.userId, erased: erased, logger: context.logger)
        return AlertsV1.EraseUserResponse(erased: UInt32(clamping: erased))
    }
}

extension AlertsStore {
    /// - Returns: the rows deleted.
    func erase(_ user: UInt64, addresses: [String], traces: [String]) async throws -> Int {
        try await database.write { db in
            var erased = 0
            func run(_ sql: String, _ arguments: StatementArguments) throws {
                try db.execute(sql: sql, arguments: arguments)
                erased += db.changesCount
            }
            let watches = try UInt64.fetchAll(db, sql: "SELECT id FROM watch_sessions WHERE initiator = ?", arguments: [user])
            let alerts = try UInt64.fetchAll(db, sql: "SELECT id FROM help_alerts WHERE initiator = ?", arguments: [user])
            // Deliveries: to them (by user or address), about them, or of their own alerts and
            // watches (rows older than the about_user column are found by source).
            let timers = try UInt64.fetchAll(db, sql: "SELECT id FROM timers WHERE owner = ?", arguments: [user])
            let sources = alerts.flatMap { ["help_now:\($0)", "help_now_resolved:\($0)", "help_now_resend:\($0)", "help_now_escalated:\($0)"] }
                + watches.flatMap { ["watch:\($0)", "watch_end:\($0)"] } + timers.flatMap { ["timer_warning:\($0)", "timer_end:\($0)"] }
            let deliveries = try UInt64.fetchAll(db, sql: """
                SELECT id FROM outbox WHERE about_user = ? OR recipient_user = ?
                    OR address IN (SELECT value FROM json_each(?)) OR source IN (SELECT value FROM json_each(?))
                    OR source LIKE ? OR source LIKE ?
                """, arguments: [user, user, Self.json(addresses), Self.json(sources), "help_answer:%:\(user):%", "watch_answer:%:\(user):%"])
            try run("DELETE FROM sent_messages WHERE idempotency_key IN (SELECT 'frienso-delivery-' || value FROM json_each(?)) OR address IN (SELECT value FROM json_each(?))",
                    [Self.json(deliveries), Self.json(addresses)])
            try run("DELETE FROM outbox WHERE id IN (SELECT value FROM json_each(?))", [Self.json(deliveries)])
            // Their own watches and alerts, with everything hanging off them.
            try run("DELETE FROM watchers WHERE session_id IN (SELECT value FROM json_each(?)) OR watcher = ?", [Self.json(watches), user])
            try run("DELETE FROM watch_sessions WHERE initiator = ?", [user])
            try run("DELETE FROM emergency_prompts WHERE alert_id IN (SELECT value FROM json_each(?)) OR user_id = ?", [Self.json(alerts), user])
            try run("DELETE FROM recipients WHERE alert_id IN (SELECT value FROM json_each(?)) OR user_id = ? OR phone IN (SELECT value FROM json_each(?))",
                    [Self.json(alerts), user, Self.json(addresses)])
            try run("DELETE FROM escalations WHERE alert_id IN (SELECT value FROM json_each(?))", [Self.json(alerts)])
            try run("DELETE FROM help_alerts WHERE initiator = ?", [user])
            try run("DELETE FROM timers WHERE owner = ?", [user])
            try run("DELETE FROM grants WHERE subject = ?1 OR viewer = ?1", [user])
            try run("DELETE FROM devices WHERE user_id = ?", [user])
            try run("DELETE FROM dismissed_circle_requests WHERE member = ?1 OR owner = ?1", [user])
            erased += try SQLiteReplyStore.eraseReplies(db, of: user, mentioning: traces)
            return erased
        }
    }

    /// A JSON array of numbers, for `json_each`.
    private static func json(_ values: [UInt64]) -> String {
        "[" + values.map(String.init).joined(separator: ",") + "]"
    }

    /// A JSON array of strings, for `json_each` (a list of any length as one bound argument).
    private static func json(_ values: [String]) -> String {
        "[" + values.map { "\"" + $0.unicodeScalars.map { c -> String in
            switch c {
            case "\"": return "\\\""
            case "\\": return "\\\\"
            default: return c.value < 0x20 ? String(format: "\\u%04x", c.value) : String(c)
            }
        }.joined() + "\"" }.joined(separator: ",") + "]"
    }
}
