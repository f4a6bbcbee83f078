import GRDB
public import FriensoProto
public import Wire

/// The graph snapshot replicas load (then they follow the `graph` event stream).
extension SocialService {
    // MARK: Replication

    /// A page of the graph. The first page is read on the writer queue, where every committed
    /// change has already been published, so its sequence number is exact; later pages may
    /// include later events, which the replica's replay makes harmless (see the proto).
    public func graphSnapshot(_ request: SocialV1.GraphSnapshotRequest, _ context: RequestContext) async throws -> SocialV1.GraphSnapshotResponse {
        let publisher = publisher, sequenceOnly = request.sequenceOnly, limit = snapshotPageSize
        let cursor = try SocialStore.SnapshotCursor(request.cursor)
        let read: @Sendable (Database) throws -> SocialV1.GraphSnapshotResponse = { db in
            var page = SocialV1.GraphSnapshotResponse(epoch: publisher.epoch, sequence: publisher.lastSequence(stream: Self.graphStream))
            guard !sequenceOnly else { return page }
            page.nextCursor = try SocialStore.snapshotPage(db, after: cursor, limit: limit, into: &page)?.text ?? ""
            return page
        }
        // Only the first page's number must match its data exactly; later pages are read from
        // the reader pool so a large snapshot does not hold up writes.
        return cursor == .start ? try await store.onWriterQueue(read) : try await store.database.read(read)
    }
}

// MARK: - Storage

/// The graph snapshot, read in pages: friendships, blocks, accepted circle members, findable
/// users, exchanges, each in rowid order. A cursor names the section and the last rowid sent.
extension SocialStore {
    struct SnapshotCursor: Equatable, Sendable {
        var section: Int
        var after: Int64

        static let start = SnapshotCursor(section: 0, after: 0)

        /// A cursor string that no page produced.
        struct NotACursor: Error, Equatable {}

        init(section: Int, after: Int64) {
            self.section = section
            self.after = after
        }

        /// - Throws: `SnapshotCursor.NotACursor` (INVALID_ARGUMENT) for a string no page produced.
        init(_ text: String) throws(NotACursor) {
            if text.isEmpty { self = .start; return }
            let parts = text.split(separator: ":")
            guard parts.count == 2, let name = parts[0].first, parts[0].count == 1,
                  let section = Self.names.firstIndex(of: name), let after = Int64(parts[1]), after >= 0 else {
                throw NotACursor()
            }
            self.init(section: section, after: after)
        }

        var text: String { "\(Self.names[section]):\(after)" }
        static let names: [Character] = ["f", "b", "c", "s", "x"]
    }

    /// Each section: the rows `(rowid, first, second)` after a rowid, in rowid order.
    private static let sectionQueries = [
        "SELECT rowid, user_a, user_b FROM friendships WHERE rowid > ? ORDER BY rowid LIMIT ?",
        "SELECT rowid, blocker, blocked FROM blocks WHERE rowid > ? ORDER BY rowid LIMIT ?",
        "SELECT rowid, owner, member FROM circle WHERE state = \(SocialV1.CircleState.accepted.rawValue) AND rowid > ? ORDER BY rowid LIMIT ?",
        "SELECT user_id, user_id, 0 FROM discovery WHERE findable AND user_id > ? ORDER BY user_id LIMIT ?",
        "SELECT id, user_a, user_b FROM exchanges WHERE id > ? ORDER BY id LIMIT ?",
    ]

    /// Appends up to `limit` facts after `cursor` to `page`.
    /// - Returns: the cursor of the next page, nil after the last.
    static func snapshotPage(_ db: Database, after cursor: SnapshotCursor, limit: Int,
                             into page: inout SocialV1.GraphSnapshotResponse) throws -> SnapshotCursor? {
        var cursor = cursor
        var room = limit
        while cursor.section < sectionQueries.count {
            let rows = try Row.fetchCursor(db, cached: sectionQueries[cursor.section], arguments: [cursor.after, room])
            var count = 0
            while let row = try rows.next() {
                let rowid: Int64 = row[0], first: UInt64 = row[1], second: UInt64 = row[2]
                switch cursor.section {
                case 0: page.friendsA.append(first); page.friendsB.append(second)
                case 1: page.blockers.append(first); page.blocked.append(second)
                case 2: page.circleOwners.append(first); page.circleMembers.append(second)
                case 3: page.findable.append(first)
                default: page.exchangesA.append(first); page.exchangesB.append(second)
                }
                cursor.after = rowid
                count += 1
            }
            room -= count
            if room == 0 { return cursor }
            cursor = SnapshotCursor(section: cursor.section + 1, after: 0)
        }
        return nil
    }
}
