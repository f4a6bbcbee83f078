import FriensoProto
import Wire

/// What social keeps, and how: friend requests, friendships, blocks, core circles, the findable
/// setting, contact exchanges, pokes, the notices alerts delivers, and idempotent replies. Two
/// engines implement it with the same behaviour (the social tests run on both):
/// `SQLiteSocialStore` (the embedded default, a file in the data folder) and
/// `PostgresSocialStore` (the `social` schema of a PostgreSQL database).
///
/// Every mutation is one transaction, committed before it returns; a request with an
/// idempotency key commits its claim in it. A mutation's graph events go to the store's
/// `onCommit` once it committed, before it returns, in commit order: a replica that loads a
/// snapshot and follows the events misses none and applies none out of order.
protocol SocialStorage: Sendable {
    /// Where replies to idempotent requests are kept (the same database).
    var replies: any ReplyStore { get }

    // Friend requests, friendships and blocks (`Friends.swift`).
    func send(from: UInt64, to: UInt64, now: Int64) async throws -> SendOutcome
    /// Accept, reject or dismiss a request addressed to `caller`.
    func respond(caller: UInt64, requestID: UInt64, action: SocialV1.RequestAction, now: Int64) async throws -> RequestRecord
    func cancel(caller: UInt64, requestID: UInt64, now: Int64) async throws -> RequestRecord
    /// Pending requests to and from `user`, newest first.
    func pendingRequests(of user: UInt64, includeDismissed: Bool) async throws -> (incoming: [RequestRecord], outgoing: [RequestRecord])
    /// Each friend's id and the time the friendship began.
    func friends(of user: UInt64) async throws -> [(id: UInt64, since: Int64)]
    func removeFriend(_ user: UInt64, _ other: UInt64) async throws
    /// Blocks `other`: ends the friendship (and circle memberships) and cancels pending requests both ways.
    func block(_ user: UInt64, _ other: UInt64, now: Int64) async throws -> BlockOutcome
    func unblock(_ user: UInt64, _ other: UInt64) async throws
    /// Whom `user` blocked, oldest block first.
    func blocked(by user: UInt64) async throws -> [UInt64]

    // The core circle (`Circle.swift`).
    /// Adds a friend (pending: a coreFriend request) or a phone number (invited), with its notice.
    func addToCircle(owner: UInt64, member: UInt64, phone: String, limit: Int, now: Int64) async throws -> CircleRecord
    func removeFromCircle(owner: UInt64, member: UInt64, phone: String) async throws
    /// The member answers the owner's coreFriend request.
    func respondToCircle(owner: UInt64, member: UInt64, accept: Bool, now: Int64) async throws -> CircleRecord
    /// `owner`'s circle, in the order members were added.
    func circle(of owner: UInt64) async throws -> [CircleRecord]
    /// The accepted members and invited numbers of up to `owners` owners after `afterOwner`,
    /// whole circles, by owner, each in the order members were added (alerts' copy).
    func circles(afterOwner: UInt64, owners: Int) async throws -> [CircleRecord]
    /// Circles `member` is in (accepted) or asked to join (pending), newest first.
    func circles(containing member: UInt64, state: SocialV1.CircleState) async throws -> [CircleRecord]

    // Discovery and contact exchange (`Discovery.swift`, `Search.swift`).
    func findable(_ user: UInt64) async throws -> Bool
    /// - Returns: the setting now. A graph event only when it changed.
    func setFindable(_ user: UInt64, _ on: Bool, now: Int64) async throws -> Bool
    func addExchange(from: UInt64, to: UInt64, location: ExchangeLocation?, placeLabel: String, now: Int64) async throws -> ExchangeOutcome
    /// `user`'s exchanges, newest first, older than exchange `before` (0: from the newest).
    func exchanges(of user: UInt64, before: UInt64, limit: Int) async throws -> [ExchangeRecord]
    /// The other users of pending friend requests to or from `user`.
    func pendingRequestPeers(of user: UInt64) async throws -> Set<UInt64>
    /// Users `user` must not be offered: friends, and anyone blocked either way.
    func excludedFromDiscovery(for user: UInt64) async throws -> Set<UInt64>

    // Pokes and notices (`Pokes.swift`).
    /// Records a poke to a friend, at most one per pair per `interval` ms (checked in the same
    /// transaction). - Returns: its id.
    func poke(from: UInt64, to: UInt64, now: Int64, interval: Int64) async throws -> UInt64
    /// Notices after `id`, oldest first.
    func notices(after id: UInt64, limit: Int) async throws -> [SocialV1.Notice]
    /// Deletes the notices made before `cutoff`. - Returns: how many.
    func pruneNotices(before cutoff: Int64) async throws -> Int

    // Erasure and export (`Erasure.swift`, `Export.swift`).
    /// Deletes every row that names `user`, and clears kept replies that mention `traces`.
    /// - Returns: the rows deleted.
    func erase(_ user: UInt64, traces: [String]) async throws -> Int
    /// After an erasure: leaves no copy of erased rows where the engine keeps old pages (SQLite:
    /// the WAL, truncated; PostgreSQL: dead tuples, vacuumed).
    func scrubErasedRows() async throws
    /// Every friend request and poke `user` sent or received, oldest first.
    func exportRows(of user: UInt64) async throws -> ([RequestRecord], [PokeRecord])

    // The graph snapshot replicas load (`Replication.swift`).
    /// A page of the graph after `cursor`. `head` gives the page its epoch and sequence; for the
    /// first page it is read where no committed change is unannounced and none announced is
    /// missing from the rows, so the number matches the data exactly.
    func snapshotPage(after cursor: GraphSnapshotCursor, limit: Int, sequenceOnly: Bool,
                      head: @escaping @Sendable () -> SocialV1.GraphSnapshotResponse) async throws -> SocialV1.GraphSnapshotResponse
}

/// A poke as export shows it.
struct PokeRecord: Sendable {
    var id: UInt64
    var from: UInt64
    var to: UInt64
    var at: Int64
}

/// Where a page of the graph snapshot ends: friendships, blocks, accepted circle members,
/// findable users, exchanges, each in the order of its rows' ids. A cursor names the section
/// and the last id sent.
struct GraphSnapshotCursor: Equatable, Sendable {
    var section: Int
    var after: Int64

    static let start = GraphSnapshotCursor(section: 0, after: 0)
    static let sections = 5

    /// A cursor string that no page produced.
    struct NotACursor: Error, Equatable {}

    init(section: Int, after: Int64) {
        self.section = section
        self.after = after
    }

    /// - Throws: `NotACursor` (INVALID_ARGUMENT) for a string no page produced.
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

    /// Adds one row of section `section` to `page`.
    static func append(section: Int, _ first: UInt64, _ second: UInt64, to page: inout SocialV1.GraphSnapshotResponse) {
        switch section {
        case 0: page.friendsA.append(first); page.friendsB.append(second)
        case 1: page.blockers.append(first); page.blocked.append(second)
        case 2: page.circleOwners.append(first); page.circleMembers.append(second)
        case 3: page.findable.append(first)
        default: page.exchangesA.append(first); page.exchangesB.append(second)
        }
    }
}
