import Foundation
import FriensoProto
import GRDB
import Storage
import Wire

/// Erasure on SQLite, in two steps so that the writer is not held while tables are read whole
/// (issue 16, `docs/benchmarks.md` item 160).
///
/// Some of what erasure searches by has no index: the outbox's recipients, subjects, addresses
/// and sources (each index would cost a page write in every commit that queues a message, item
/// 78, for a search made once per deleted account), `sent_messages` by address, `recipients` by
/// phone number, `emergency_prompts` by user. Read in the write transaction, those walks held
/// every raise, answer and delivery back for 1.6 s at 4.5M deliveries and 1M alerts. Now a
/// reader walks them on one snapshot, without the writer, and the write transaction reads only
/// what the snapshot cannot have seen:
/// - outbox rows made after it: ids above the snapshot's largest (AUTOINCREMENT: an id is never
///   used again, so no later row gets one at or below it);
/// - rows of the snapshot whose searched columns may change: `about_user`, `recipient_user`
///   and `source` never change after a row is queued, and `address` changes only from empty to
///   the recipient's phone number (`DeliveryPlan.addressed`), in a pending row. Those rows (pending
///   with an empty address) are searched again by id;
/// - rows of the other three made after it (`WalkedRows`), whose searched columns never change.
/// Rows the snapshot found and something else deleted since are simply not deleted twice.
extension SQLiteAlertsStore {
    /// What the reader's walk found, and where its snapshot ended.
    struct ErasureSearch: Sendable {
        /// Outbox rows (ids up to `outboxBound`) to, about or of the person.
        var deliveries: [UInt64] = []
        /// The largest outbox id in the snapshot (0: none).
        var outboxBound: Int64 = 0
        /// Pending rows with no address yet (ids up to `outboxBound`): searched again.
        var unaddressed: [UInt64] = []
        /// `sent_messages` sent to one of the person's addresses.
        var sent = WalkedRows()
        /// Other people's alerts' `recipients` rows for one of the person's phone numbers.
        var recipients = WalkedRows()
        /// `emergency_prompts` rows shown to the person (their own alerts' are found by alert).
        var prompts = WalkedRows()
    }

    func erase(_ user: UInt64, addresses: [String], traces: [String]) async throws -> Int {
        let found = try await database.scan { db in try Self.searchErased(db, user: user, addresses: addresses) }
        return try await database.write { db in try Self.erase(db, user: user, addresses: addresses, traces: traces, found: found) }
    }

    /// The search of a person's deliveries: to them (by user or address), about them, of their own
    /// alerts, watches and timers, and their answers to other people's. `?1` the user, `?2` their
    /// addresses, `?3` the sources, `?4`/`?5` the answers' patterns (`deliveryTerms(…)`).
    static let erasedDeliveryTerms = """
        (about_user = ?1 OR recipient_user = ?1 OR address IN (SELECT value FROM json_each(?2)) OR source IN (SELECT value FROM json_each(?3))
            OR source LIKE ?4 OR source LIKE ?5)
        """

    /// The arguments of `erasedDeliveryTerms` for `user`, who owns `owned`.
    private static func deliveryTerms(user: UInt64, owned: (watches: [UInt64], alerts: [UInt64], timers: [UInt64]),
                                      addresses: [String]) -> [(any DatabaseValueConvertible)?] {
        let (sources, patterns) = OutboxRows.erasedSources(alerts: owned.alerts, watches: owned.watches, timers: owned.timers, user: user)
        return [user, JSONList.of(addresses), JSONList.of(sources), patterns[0], patterns[1]]
    }

    private static func ownedIDs(_ db: Database, _ user: UInt64) throws -> (watches: [UInt64], alerts: [UInt64], timers: [UInt64]) {
        (try UInt64.fetchAll(db, sql: "SELECT id FROM watch_sessions WHERE initiator = ?", arguments: [user]),
         try UInt64.fetchAll(db, sql: "SELECT id FROM help_alerts WHERE initiator = ?", arguments: [user]),
         try UInt64.fetchAll(db, sql: "SELECT id FROM timers WHERE owner = ?", arguments: [user]))
    }

    /// The first step, on a reader (one snapshot): the walks of the outbox, `sent_messages`,
    /// `recipients` and `emergency_prompts`.
    static func searchErased(_ db: Database, user: UInt64, addresses: [String]) throws -> ErasureSearch {
        var found = ErasureSearch()
        let terms = deliveryTerms(user: user, owned: try ownedIDs(db, user), addresses: addresses)
        found.outboxBound = try Int64.fetchOne(db, sql: "SELECT coalesce(max(id), 0) FROM outbox") ?? 0
        found.deliveries = try UInt64.fetchAll(db, sql: "SELECT id FROM outbox WHERE id <= ?6 AND \(erasedDeliveryTerms)",
                                               arguments: StatementArguments(terms + [found.outboxBound]))
        found.unaddressed = try UInt64.fetchAll(db, sql: unaddressedSQL, arguments: [found.outboxBound])
        if !addresses.isEmpty {
            found.sent = try WalkedRows.walk(db, .sentToAddresses, [JSONList.of(addresses)])
            found.recipients = try WalkedRows.walk(db, .recipientsByPhone, [JSONList.of(addresses)])
        }
        found.prompts = try WalkedRows.walk(db, .promptsOfUser, [user])
        return found
    }

    /// Pending outbox rows with no address yet, up to an id: the rows whose address a delivery
    /// pass may fill in. `+id`: searched in the partial index of the pending rows, not by walking
    /// every id up to the bound.
    static let unaddressedSQL = """
        SELECT id FROM outbox WHERE status = \(AlertsV1.DeliveryStatus.pending.rawValue) AND address = '' AND +id <= ?
        """

    /// The second step, in the write transaction: what the snapshot could not have seen, then
    /// every delete. - Returns: rows deleted.
    static func erase(_ db: Database, user: UInt64, addresses: [String], traces: [String], found: ErasureSearch) throws -> Int {
        var erased = 0
        func run(_ sql: String, _ arguments: StatementArguments) throws {
            try db.execute(sql: sql, arguments: arguments)
            erased += db.changesCount
        }
        let owned = try ownedIDs(db, user)
        let terms = deliveryTerms(user: user, owned: owned, addresses: addresses)
        var deliveries = Set(found.deliveries)
        deliveries.formUnion(try UInt64.fetchAll(db, sql: "SELECT id FROM outbox WHERE id > ?6 AND \(erasedDeliveryTerms)",
                                                 arguments: StatementArguments(terms + [found.outboxBound])))
        deliveries.formUnion(try UInt64.fetchAll(db, sql: "SELECT id FROM outbox WHERE id IN (SELECT value FROM json_each(?6)) AND \(erasedDeliveryTerms)",
                                                 arguments: StatementArguments(terms + [JSONList.of(found.unaddressed)])))
        try run("DELETE FROM sent_messages WHERE idempotency_key IN (SELECT value FROM json_each(?))", [JSONList.of(deliveries.map(OutgoingMessage.idempotencyKey(ofDelivery:)))])
        if !addresses.isEmpty { erased += try found.sent.delete(db, .sentToAddresses, [JSONList.of(addresses)]) }
        try run("DELETE FROM outbox WHERE id IN (SELECT value FROM json_each(?))", [JSONList.of(Array(deliveries))])
        // Their own watches and alerts, with everything hanging off them.
        try run("DELETE FROM watchers WHERE session_id IN (SELECT value FROM json_each(?)) OR watcher = ?", [JSONList.of(owned.watches), user])
        try run("DELETE FROM watch_sessions WHERE initiator = ?", [user])
        try run("DELETE FROM emergency_prompts WHERE alert_id IN (SELECT value FROM json_each(?))", [JSONList.of(owned.alerts)])
        erased += try found.prompts.delete(db, .promptsOfUser, [user])
        try run("DELETE FROM recipients WHERE alert_id IN (SELECT value FROM json_each(?))", [JSONList.of(owned.alerts)])
        try run("DELETE FROM recipients WHERE user_id = ?", [user])
        if !addresses.isEmpty { erased += try found.recipients.delete(db, .recipientsByPhone, [JSONList.of(addresses)]) }
        try run("DELETE FROM escalations WHERE alert_id IN (SELECT value FROM json_each(?))", [JSONList.of(owned.alerts)])
        try run("DELETE FROM help_alerts WHERE initiator = ?", [user])
        try run("DELETE FROM timers WHERE owner = ?", [user])
        try run("DELETE FROM grants WHERE subject = ?1 OR viewer = ?1", [user])
        try run("DELETE FROM devices WHERE user_id = ?", [user])
        try run("DELETE FROM dismissed_circle_requests WHERE member = ?1 OR owner = ?1", [user])
        erased += try SQLiteReplyStore.eraseReplies(db, of: user, mentioning: traces)
        return erased
    }

    func scrubErasedRows() async throws {
        try await database.truncateWAL()
    }
}

extension WalkedRows.Search {
    static let sentToAddresses = Self(table: "sent_messages", identity: "idempotency_key", condition: "address IN (SELECT value FROM json_each(?))")
    static let recipientsByPhone = Self(table: "recipients", identity: "alert_id || ':' || position", condition: "phone IN (SELECT value FROM json_each(?))")
    static let promptsOfUser = Self(table: "emergency_prompts", identity: "id", condition: "user_id = ?")
}
