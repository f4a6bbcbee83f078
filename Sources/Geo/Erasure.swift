public import FriensoProto
import GRDB
import Storage
public import Wire

/// Erasing a deleted account (accounts calls `EraseUser` until it succeeds): fixes, history,
/// settings, grants either way, check-ins and kept replies, in one transaction; then the memory
/// state and the history fold forget the person. A location update already in flight when the
/// session was revoked can still land after this: accounts calls again after a settling delay
/// (`AccountsConfig.erasureRecheck`), which erases it too.
extension GeoService {
    public func eraseUser(_ request: GeoV1.EraseUserRequest, _ context: RequestContext) async throws -> GeoV1.EraseUserResponse {
        let user = request.userId
        try Erasure.check(user: request.userId, traces: request.traces)
        let erased = try await store.erase(user, traces: request.traces) { [self] in forgetInMemory(user) }
        try await store.scrubErased()
        if erased > 0 { context.logger.info("erased a deleted account", metadata: ["user-id": "\(user)", "rows": "\(erased)"]) }
        return GeoV1.EraseUserResponse(erased: UInt32(clamping: erased))
    }

    /// What memory holds of an erased person goes: their state, their rows in the fold's plan,
    /// the audit counts not written yet (this instance's erasure, or another's announced).
    func forgetInMemory(_ user: UInt64) {
        state.mutex.withLock { $0.forget(user) }
        folding.mutex.withLock { $0.forget(user) }
        audit.forget(user)
    }
}

extension SQLiteGeoStore {
    /// The rows are zeroed in the file (`secure_delete`); the WAL's older frames may still hold them.
    func scrubErased() async throws {
        try await database.truncateWAL()
    }

    /// - Parameter forgotten: runs once the deletion committed (before anyone reads again).
    /// - Returns: the rows deleted.
    func erase(_ user: UInt64, traces: [String], forgotten: @escaping @Sendable () -> Void) async throws -> Int {
        // Place events name the person as viewer or subject, and no index serves that search (a
        // week of them): walked on a reader first, so the writer, which every location update
        // waits for, is not held meanwhile (`WalkedRows`; `docs/benchmarks.md` item 163).
        let events = try await database.scan { db in try WalkedRows.walk(db, .placeEventsOf, [user, user]) }
        return try await database.write({ db in
            var erased = try events.delete(db, .placeEventsOf, [user, user])
            // The indexed rows and the tail not folded yet (history has no index by user).
            try db.run(sql: "DELETE FROM history WHERE id IN (\(Self.userHistory))", arguments: [user, try Self.foldedThrough(db)])
            erased += db.changesCount
            for sql in [
                "DELETE FROM history_by_user WHERE user_id = ?1",
                "DELETE FROM latest WHERE user_id = ?1",
                "DELETE FROM sharing WHERE user_id = ?1",
                "DELETE FROM grants WHERE subject = ?1 OR viewer = ?1",
                "DELETE FROM check_ins WHERE user_id = ?1",
                "DELETE FROM precision WHERE subject = ?1 OR viewer = ?1",
                "DELETE FROM audit WHERE subject = ?1 OR viewer = ?1",
                "DELETE FROM share_links WHERE owner = ?1",
                "DELETE FROM zones WHERE user_id = ?1",
                "DELETE FROM place_alerts WHERE viewer = ?1 OR subject = ?1",
                "DELETE FROM place_alert_access WHERE subject = ?1 OR viewer = ?1",
            ] {
                try db.run(sql: sql, arguments: [user])
                erased += db.changesCount
            }
            erased += try SQLiteReplyStore.eraseReplies(db, of: user, mentioning: traces)
            return erased
        }, committed: { _ in forgotten() })
    }
}

extension WalkedRows.Search {
    /// A person's place events, as viewer or subject (two arguments: the user twice). An event
    /// never changes, and its id is AUTOINCREMENT.
    static let placeEventsOf = Self(table: "place_events", identity: "id", condition: "viewer = ? OR subject = ?")
}
