import FriensoProto
import Logging
import PostgresNIO
import Storage

extension RequestRecord {
    static let columns = "id, from_user, to_user, state, dismissed, created_at_ms, updated_at_ms"
    typealias Columns = (Int64, Int64, Int64, Int64, Bool, Int64, Int64)

    init(_ row: Columns) {
        self.init(id: UInt64(row.0), from: UInt64(row.1), to: UInt64(row.2), state: SocialV1.RequestState(rawValue: Int32(truncatingIfNeeded: row.3)),
                  dismissed: row.4, createdAtMs: row.5, updatedAtMs: row.6)
    }
}

/// Friend requests, friendships and blocks on PostgreSQL (the rules as `Friends.swift` states them).
extension PostgresSocialStore {
    static func requests<Rows: AsyncSequence>(_ rows: Rows) async throws -> [RequestRecord] where Rows.Element == PostgresRow {
        var records: [RequestRecord] = []
        for try await row in rows.decode(RequestRecord.Columns.self) { records.append(RequestRecord(row)) }
        return records
    }

    func request(_ connection: PostgresConnection, id: UInt64) async throws -> RequestRecord? {
        try await Self.requests(connection.prepared(
            "SELECT \(unescaped: RequestRecord.columns) FROM friend_requests WHERE id = \(Int64(id))", logger: logger)).first
    }

    func pendingRequest(_ connection: PostgresConnection, from: UInt64, to: UInt64) async throws -> RequestRecord? {
        try await Self.requests(connection.prepared("""
            SELECT \(unescaped: RequestRecord.columns) FROM friend_requests
            WHERE from_user = \(Int64(from)) AND to_user = \(Int64(to)) AND state = \(Self.pending)
            """, logger: logger)).first
    }

    func setState(_ connection: PostgresConnection, request id: UInt64, _ state: SocialV1.RequestState, now: Int64) async throws {
        try await connection.prepared("""
            UPDATE friend_requests SET state = \(Int64(state.rawValue)), updated_at_ms = \(now) WHERE id = \(Int64(id))
            """, logger: logger)
    }

    func befriend(_ connection: PostgresConnection, _ x: UInt64, _ y: UInt64, now: Int64) async throws {
        let (a, b) = Self.edge(x, y)
        try await connection.prepared("""
            INSERT INTO friendships (user_a, user_b, since_ms) VALUES (\(Int64(a)), \(Int64(b)), \(now)) ON CONFLICT DO NOTHING
            """, logger: logger)
    }

    func send(from: UInt64, to: UInt64, now: Int64) async throws -> SendOutcome {
        try await mutate(orderedBy: [from, to]) { connection, events in
            guard from != to else { throw FriendRefusal.requestToYourself }
            try await lockPair(connection, from, to)
            guard try await !Self.blocked(connection, from, to, logger: logger) else { throw FriendRefusal.requestAcrossBlock }
            guard try await !Self.areFriends(connection, from, to, logger: logger) else { throw FriendRefusal.alreadyFriends }
            if let theirs = try await pendingRequest(connection, from: to, to: from) {
                try await setState(connection, request: theirs.id, .accepted, now: now)
                try await befriend(connection, from, to, now: now)
                let (a, b) = Self.edge(from, to)
                events.append(Self.event(.friendshipAdded, a, b))
                return .collapsed(try await request(connection, id: theirs.id) ?? theirs)
            }
            if let mine = try await pendingRequest(connection, from: from, to: to) { return .existing(mine) }
            let created = try await Self.requests(connection.prepared("""
                INSERT INTO friend_requests (from_user, to_user, state, created_at_ms, updated_at_ms)
                VALUES (\(Int64(from)), \(Int64(to)), \(Self.pending), \(now), \(now)) RETURNING \(unescaped: RequestRecord.columns)
                """, logger: logger))
            guard let created = created.first else { throw StoreInvariant("the friend request just written is missing") }
            return .created(created)
        }
    }

    /// The request `id`, read again once its pair is locked (so no change of the pair runs meanwhile).
    private func lockedRequest(_ connection: PostgresConnection, id: UInt64) async throws -> RequestRecord {
        guard let first = try await request(connection, id: id) else { throw FriendRefusal.noRequest(id) }
        try await lockPair(connection, first.from, first.to)
        guard let request = try await request(connection, id: id) else { throw FriendRefusal.noRequest(id) }
        return request
    }

    func respond(caller: UInt64, requestID: UInt64, action: SocialV1.RequestAction, now: Int64) async throws -> RequestRecord {
        // Its people first (a request's never change), so the mutation takes both their turns.
        guard let people = try await database.read({ connection in try await request(connection, id: requestID) }) else {
            throw FriendRefusal.noRequest(requestID)
        }
        return try await mutate(orderedBy: [people.from, people.to]) { connection, events in
            let request = try await lockedRequest(connection, id: requestID)
            guard request.to == caller else { throw FriendRefusal.notAddressedToYou(requestID) }
            // The same answer again (a resend whose first reply was lost) is answered as it is.
            if (action == .accept && request.state == .accepted) || (action == .reject && request.state == .rejected) { return request }
            guard request.state == .pending else { throw FriendRefusal.answeredAlready(requestID, request.state) }
            switch action {
            case .accept:
                try await setState(connection, request: requestID, .accepted, now: now)
                try await befriend(connection, request.from, request.to, now: now)
                let (a, b) = Self.edge(request.from, request.to)
                events.append(Self.event(.friendshipAdded, a, b))
            case .reject:
                try await setState(connection, request: requestID, .rejected, now: now)
            case .dismiss:
                try await connection.prepared(
                    "UPDATE friend_requests SET dismissed = true, updated_at_ms = \(now) WHERE id = \(Int64(requestID))", logger: logger)
            default:
                throw FriendRefusal.unknownAction
            }
            guard let updated = try await self.request(connection, id: requestID) else { throw StoreInvariant("the friend request just written is missing") }
            return updated
        }
    }

    func cancel(caller: UInt64, requestID: UInt64, now: Int64) async throws -> RequestRecord {
        try await database.write { connection in
            let request = try await lockedRequest(connection, id: requestID)
            guard request.from == caller else { throw FriendRefusal.notYourRequest(requestID) }
            if request.state == .cancelled { return request } // cancelled already: a resend, answered as it is
            guard request.state == .pending else { throw FriendRefusal.noLongerPending(requestID) }
            try await setState(connection, request: requestID, .cancelled, now: now)
            guard let updated = try await self.request(connection, id: requestID) else { throw StoreInvariant("the friend request just written is missing") }
            return updated
        }
    }

    func pendingRequests(of user: UInt64, includeDismissed: Bool) async throws -> (incoming: [RequestRecord], outgoing: [RequestRecord]) {
        // One statement for both lists (one round trip, one snapshot), split here.
        let all = try await database.read { connection in
            try await Self.requests(connection.prepared("""
                SELECT \(unescaped: RequestRecord.columns) FROM friend_requests
                WHERE state = \(Self.pending)
                  AND ((to_user = \(Int64(user)) AND (\(includeDismissed) OR NOT dismissed)) OR from_user = \(Int64(user)))
                ORDER BY created_at_ms DESC, id DESC
                """, logger: logger))
        }
        return (all.filter { $0.to == user }, all.filter { $0.from == user })
    }

    func friends(of user: UInt64) async throws -> [(id: UInt64, since: Int64)] {
        try await database.read { connection in
            var friends: [(id: UInt64, since: Int64)] = []
            let rows = try await connection.prepared("""
                SELECT user_b, since_ms FROM friendships WHERE user_a = \(Int64(user))
                UNION ALL SELECT user_a, since_ms FROM friendships WHERE user_b = \(Int64(user))
                """, logger: logger)
            for try await (id, since) in rows.decode((Int64, Int64).self) { friends.append((UInt64(id), since)) }
            return friends
        }
    }

    func removeFriend(_ user: UInt64, _ other: UInt64) async throws {
        try await mutate(orderedBy: [user, other]) { connection, events in
            try await lockPair(connection, user, other)
            let (a, b) = Self.edge(user, other)
            let removed = try await PostgresServiceDatabase.count(connection.prepared(
                "DELETE FROM friendships WHERE user_a = \(Int64(a)) AND user_b = \(Int64(b)) RETURNING 1", logger: logger))
            guard removed == 1 else { throw FriendRefusal.notFriends(other) }
            events.append(Self.event(.friendshipRemoved, a, b))
            events += try await dropCircle(connection, user, other)
        }
    }

    func block(_ user: UInt64, _ other: UInt64, now: Int64) async throws -> BlockOutcome {
        try await mutate(orderedBy: [user, other]) { connection, events in
            guard user != other else { throw FriendRefusal.blockYourself }
            try await lockPair(connection, user, other)
            let added = try await PostgresServiceDatabase.count(connection.prepared("""
                INSERT INTO blocks (blocker, blocked, created_at_ms) VALUES (\(Int64(user)), \(Int64(other)), \(now))
                ON CONFLICT DO NOTHING RETURNING 1
                """, logger: logger))
            if added == 1 { events.append(Self.event(.blockAdded, user, other)) }
            let (a, b) = Self.edge(user, other)
            let removedFriendship = try await PostgresServiceDatabase.count(connection.prepared(
                "DELETE FROM friendships WHERE user_a = \(Int64(a)) AND user_b = \(Int64(b)) RETURNING 1", logger: logger)) == 1
            if removedFriendship { events.append(Self.event(.friendshipRemoved, a, b)) }
            events += try await dropCircle(connection, user, other)
            let removedRequests = try await PostgresServiceDatabase.count(connection.prepared("""
                UPDATE friend_requests SET state = \(Int64(SocialV1.RequestState.cancelled.rawValue)), updated_at_ms = \(now)
                WHERE state = \(Self.pending) AND ((from_user = \(Int64(user)) AND to_user = \(Int64(other)))
                                                 OR (from_user = \(Int64(other)) AND to_user = \(Int64(user))))
                RETURNING 1
                """, logger: logger))
            try await connection.prepared("""
                DELETE FROM exchange_intents WHERE (from_user = \(Int64(user)) AND to_user = \(Int64(other)))
                                                OR (from_user = \(Int64(other)) AND to_user = \(Int64(user)))
                """, logger: logger)
            return BlockOutcome(removedFriendship: removedFriendship, removedRequests: removedRequests)
        }
    }

    func unblock(_ user: UInt64, _ other: UInt64) async throws {
        try await mutate(orderedBy: [user, other]) { connection, events in
            try await lockPair(connection, user, other)
            let removed = try await PostgresServiceDatabase.count(connection.prepared(
                "DELETE FROM blocks WHERE blocker = \(Int64(user)) AND blocked = \(Int64(other)) RETURNING 1", logger: logger))
            guard removed == 1 else { throw FriendRefusal.notBlocked(other) }
            events.append(Self.event(.blockRemoved, user, other))
        }
    }

    func blocked(by user: UInt64) async throws -> [UInt64] {
        try await database.read { connection in
            try await PostgresServiceDatabase.ids(connection.prepared(
                "SELECT blocked FROM blocks WHERE blocker = \(Int64(user)) ORDER BY created_at_ms, id", logger: logger))
        }
    }
}
