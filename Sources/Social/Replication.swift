import GRDB
public import FriensoProto
public import Wire

/// The graph snapshot replicas load (then they follow the `graph` event stream).
extension SocialService {
    // MARK: Replication

    /// A page of the graph. The first page's sequence number is exact (see
    /// `SocialStorage.snapshotPage`); later pages may include later events, which the replica's
    /// replay makes harmless (see the proto).
    public func graphSnapshot(_ request: SocialV1.GraphSnapshotRequest, _ context: RequestContext) async throws -> SocialV1.GraphSnapshotResponse {
        let publisher = publisher
        let cursor = try GraphSnapshotCursor(request.cursor)
        if cursor == .start { await publisher.catchUp() } // the head covers every change committed before this call
        return try await store.snapshotPage(after: cursor, limit: snapshotPageSize, sequenceOnly: request.sequenceOnly) {
            SocialV1.GraphSnapshotResponse(epoch: publisher.epoch, sequence: publisher.lastSequence(stream: Self.graphStream))
        }
    }
}

// MARK: - Storage

/// The graph snapshot on SQLite: each section in rowid order.
extension SQLiteSocialStore {
    /// Each section: the rows `(rowid, first, second)` after a rowid, in rowid order.
    private static let sectionQueries = [
        "SELECT rowid, user_a, user_b FROM friendships WHERE rowid > ? ORDER BY rowid LIMIT ?",
        "SELECT rowid, blocker, blocked FROM blocks WHERE rowid > ? ORDER BY rowid LIMIT ?",
        "SELECT rowid, owner, member FROM circle WHERE state = \(SocialV1.CircleState.accepted.rawValue) AND rowid > ? ORDER BY rowid LIMIT ?",
        "SELECT user_id, user_id, 0 FROM discovery WHERE findable AND user_id > ? ORDER BY user_id LIMIT ?",
        "SELECT id, user_a, user_b FROM exchanges WHERE id > ? ORDER BY id LIMIT ?",
    ]

    func snapshotPage(after cursor: GraphSnapshotCursor, limit: Int, sequenceOnly: Bool,
                      head: @escaping @Sendable () -> SocialV1.GraphSnapshotResponse) async throws -> SocialV1.GraphSnapshotResponse {
        let read: @Sendable (Database) throws -> SocialV1.GraphSnapshotResponse = { db in
            var page = head()
            guard !sequenceOnly else { return page }
            page.nextCursor = try Self.snapshotPage(db, after: cursor, limit: limit, into: &page)?.text ?? ""
            return page
        }
        // The first page is read on the writer queue, where every committed change has been
        // announced, so its number is exact; later pages come from the reader pool, so a large
        // snapshot does not hold up writes (they may include later events, which replay makes harmless).
        return cursor == .start ? try await onWriterQueue(read) : try await database.read(read)
    }

    /// Appends up to `limit` facts after `cursor` to `page`.
    /// - Returns: the cursor of the next page, nil after the last.
    private static func snapshotPage(_ db: Database, after cursor: GraphSnapshotCursor, limit: Int,
                             into page: inout SocialV1.GraphSnapshotResponse) throws -> GraphSnapshotCursor? {
        var cursor = cursor
        var room = limit
        while cursor.section < sectionQueries.count {
            var count = 0
            try Row.forEach(db, cached: sectionQueries[cursor.section], arguments: [cursor.after, room]) { row in
                let rowid: Int64 = try row[0], first: UInt64 = try row[1], second: UInt64 = try row[2]
                GraphSnapshotCursor.append(section: cursor.section, first, second, to: &page)
                cursor.after = rowid
                count += 1
            }
            room -= count
            if room == 0 { return cursor }
            cursor = GraphSnapshotCursor(section: cursor.section + 1, after: 0)
        }
        return nil
    }
}
