public import FriensoProto
import Synchronization

/// A kept reply and the digest of the request it answered. `reply` is nil for a claim: the
/// request's mutation committed (the claim is written in its transaction) but the process died
/// before the reply was saved.
public struct StoredReply: Sendable, Equatable {
    public var digest: UInt64
    public var reply: Envelope?

    public init(digest: UInt64, reply: Envelope?) {
        self.digest = digest
        self.reply = reply
    }
}

/// The idempotent request the current task is handling, for the storage layer: a service's
/// database writes the request's claim in the same transaction as its mutation, so "applied"
/// and "known to be applied" commit together (`Storage.ServiceDatabase`). With `dryRun`,
/// the request was applied before and its reply lost in a crash: the handler runs again to
/// compute the reply, and every write it makes is rolled back.
public struct IdempotencyScope: Sendable {
    public var key: String
    public var digest: UInt64
    public var dryRun: Bool
    /// Whether this run of the request has written its claim yet (shared by its copies).
    public let claims = ClaimLedger()
    /// Set when the reply cache did not read the durable store before the handler ran (a method
    /// that claims first, `MethodRouter.claimFirst`): whether the store holds the key. The
    /// handler asks it through `confirmFirstRun` before anything its claim cannot take back.
    let storeHolds: (@Sendable () async -> Bool)?
    /// The request, when its reply may be written in the transaction of its write, on top of
    /// the claim (a keyed request started on the host's reactor: `reply(payload:)`).
    let request: Envelope?

    public init(key: String, digest: UInt64, dryRun: Bool) {
        self.init(key: key, digest: digest, dryRun: dryRun, storeHolds: nil)
    }

    init(key: String, digest: UInt64, dryRun: Bool, storeHolds: (@Sendable () async -> Bool)?, request: Envelope? = nil) {
        self.key = key
        self.digest = digest
        self.dryRun = dryRun
        self.storeHolds = storeHolds
        self.request = request
    }

    /// The reply envelope for `payload` (an OK response), for the storage layer to write in the
    /// request's own transaction, on top of its claim, so the mutation and its reply are durable
    /// together: a retry after a crash then gets the reply, where a claim alone could only say
    /// ALREADY_EXISTS for a handler whose dry run would create a row again. nil when the host
    /// saves the reply itself after the handler (a request on a task, or a dry run); `payload`
    /// is then not encoded at all.
    public func reply(payload: @autoclosure () -> [UInt8]) -> Envelope? {
        guard !dryRun, let request else { return nil }
        return request.reply(payload: payload())
    }

    @TaskLocal public static var current: IdempotencyScope?

    /// For a handler, before it does what the claim of its first write cannot take back (a call
    /// that changes another service). In the dry run of a request applied before a crash lost
    /// its reply, throws `appliedOnceAlready` there and then: the effect belongs to the first run
    /// and may have been overtaken since (a check-in's photo by a later check-in's). For a
    /// method that claims first, reads the durable store the reply cache skipped, and when an
    /// earlier run of this request left its claim or reply there, throws `claimedAlready`
    /// without doing it (the host then answers from the store, as the claim's refusal would have
    /// it); it reads once. Does nothing for any other request.
    public static func confirmFirstRun() async throws {
        guard let scope = current else { return }
        if scope.dryRun { throw scope.appliedOnceAlready }
        guard let storeHolds = scope.storeHolds, scope.claims.mustBeFirst, !scope.claims.confirmed else { return }
        if await storeHolds() {
            scope.claims.collided()
            throw claimedAlready(scope.key)
        }
        scope.claims.confirm()
    }

    /// A mutation whose request was applied under its key already (its claim is there): refused
    /// (rolled back), as a transient error, so the client's retry is answered with the stored reply.
    public static func claimedAlready(_ key: String) -> RPCError {
        .unavailable("this request (idempotency key \"\(key.split(separator: "|").last ?? "")\") was applied already or is being applied: retry it for its reply")
    }

    /// The answer to a request applied before its reply was lost (a crash between the commit and
    /// the reply): it is not applied again, and a dry run could not give the reply back (the
    /// mutation creates a row, or refuses now that its own row is there).
    public var appliedOnceAlready: RPCError { Self.appliedOnceAlready(key) }

    public static func appliedOnceAlready(_ key: String) -> RPCError {
        RPCError(.alreadyExists, "this request (idempotency key \"\(key.split(separator: "|").last ?? "")\") was applied once already; its reply was lost when the service stopped: read the current state instead of retrying")
    }
}

extension IdempotencyScope {
    /// Runs `body` on a task with `scope` bound, as the host binds it for a handler on a task,
    /// and hands the outcome to `done`: for work started without a task (a keyed request taken
    /// on the host's reactor) whose next step must suspend (a call to another service, an engine
    /// with no write queue).
    public static func onTask<T: Sendable>(bound scope: IdempotencyScope?, _ body: @escaping @Sendable () async throws -> T,
                                           then done: @escaping @Sendable (Result<T, any Error>) -> Void) {
        Task {
            do { done(.success(try await $current.withValue(scope) { try await body() })) } catch { done(.failure(error)) }
        }
    }
}

/// Whether one run of an idempotent request has written its claim. Its first mutation must
/// write it: a claim already there means the request was applied (or is being applied) by
/// another run whose claim the reply cache's read missed, and that mutation is refused instead
/// of applied twice. A handler's later mutations find their own run's claim (handlers that make
/// more than one write per request: a password reset, an upload).
public final class ClaimLedger: Sendable {
    private let written = Atomic<Bool>(false)

    public init() {}

    /// Whether a claim already there must refuse the mutation (none of this run's is yet).
    public var mustBeFirst: Bool { !written.load(ordering: .acquiring) }

    /// This run's claim is written (in a transaction that commits unless its mutation fails).
    public func wrote() { written.store(true, ordering: .releasing) }

    private let collision = Atomic<Bool>(false)
    private let checked = Atomic<Bool>(false)

    /// A claim or reply of another run of this request was found where this run's claim was to
    /// go: the mutation was refused. The host then looks the key up (a method that claims first).
    public func collided() { collision.store(true, ordering: .releasing) }
    public var hasCollided: Bool { collision.load(ordering: .acquiring) }

    /// `confirmFirstRun` read the store and found nothing.
    func confirm() { checked.store(true, ordering: .releasing) }
    var confirmed: Bool { checked.load(ordering: .acquiring) }

    private let kept = Mutex<Envelope?>(nil)

    /// The storage layer wrote `reply` in this run's committed transaction, on top of its claim
    /// (`IdempotencyScope.reply(payload:)`): the host answers with it and saves nothing after.
    public func keep(_ reply: Envelope) { kept.withLock { $0 = reply } }

    /// The reply this run's transaction made durable, if it did.
    public var keptReply: Envelope? { kept.withLock { $0 } }
}

/// Durable storage for replies to idempotent mutations, so a retry after a restart is not applied
/// twice. Services with a database implement it over their own storage.
public protocol ReplyStore: Sendable {
    func load(_ key: String) async -> StoredReply?
    func save(_ key: String, _ stored: StoredReply) async
    /// Saves without making the caller wait, then calls `done` (short, non-blocking), whether the
    /// save landed or not: a lost save leaves the claim, and the retry is a dry run. By default a
    /// task runs `save`; a store that can queue the write itself does so with no task (SQLite's
    /// write queue: a task per reply woke a thread of Swift's pool for every mutation with a key).
    func save(_ key: String, _ stored: StoredReply, then done: @escaping @Sendable () -> Void)
}

extension ReplyStore {
    public func save(_ key: String, _ stored: StoredReply, then done: @escaping @Sendable () -> Void) {
        Task {
            await save(key, stored)
            done()
        }
    }
}

/// Remembers the reply to every request that carried an idempotency key, keyed by
/// caller, method and key, and makes a duplicate wait for the first when both are in flight.
/// Recent replies are kept in memory (bounded, oldest evicted first); a `ReplyStore` adds durability.
public final class ReplyCache: Sendable {
    public enum Begin: Sendable {
        /// First sighting here: call `finish` with the reply. `previous` is the reply the durable
        /// store kept from before a restart; use it instead of running the handler again.
        case execute(previous: Envelope?)
        /// Applied before a crash that lost its reply (a claim without a reply): run the handler
        /// in a dry run (`IdempotencyScope.dryRun`) for the reply, then `finish`.
        case recover
        /// A finished reply to replay.
        case replay(Envelope)
        /// The same request is running now: its reply will be given to this waiter too.
        case wait
        /// The key was used for a different request (another payload): refuse this one, and the
        /// duplicates of it that waited meanwhile (host request keys).
        case mismatch(waiters: [UInt64])
    }

    private struct State {
        var done: [String: StoredReply] = [:]
        var order: [String] = []
        var head = 0
        var running: [String: (digest: UInt64, waiters: [UInt64])] = [:] // key -> the request's digest, waiting host request keys
    }

    private let state = Mutex(State())
    private let capacity: Int
    private let store: (any ReplyStore)?

    /// Whether replies outlive the process (the service's database keeps them, and its writes
    /// carry the claim: see `IdempotencyScope`).
    public var isDurable: Bool { store != nil }

    public init(capacity: Int = 50_000, store: (any ReplyStore)? = nil) {
        self.capacity = capacity
        self.store = store
    }

    /// What names a request: the caller (and, for anonymous calls, the client's address), the
    /// method and the key, so one client's key can never replay another client's reply; and a
    /// digest of the payload, so a key reused for a different request is refused, not run as new
    /// (a client bug that would otherwise apply a second mutation under a "retry").
    public static func key(for envelope: Envelope) -> (key: String, digest: UInt64) {
        let who = envelope.callerUserId != 0 ? "u\(envelope.callerUserId)" : "a\(envelope.clientAddress)"
        return ("\(who)|\(envelope.method)|\(envelope.idempotencyKey)", fnv1a(envelope.payload))
    }

    /// FNV-1a, 64 bits: stable across processes (Swift's `Hasher` is seeded per run), so the
    /// durable store's keys survive a restart.
    static func fnv1a(_ bytes: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return hash
    }

    /// - Parameter claimsFirst: the method's handler may run before the durable store is read
    ///   (`MethodRouter.claimFirst`): the claim its first write makes refuses a request applied
    ///   before, and the host then asks `afterCollision`. Requests in memory are answered as ever.
    func begin(_ key: String, digest: UInt64, waiter: UInt64, claimsFirst: Bool = false) async -> Begin {
        let first = beginInMemory(key, digest: digest, waiter: waiter)
        guard case .execute = first, let store, !claimsFirst else { return first }
        guard let previous = await store.load(key) else { return first }
        return answer(from: previous, key, digest: digest)
    }

    /// `begin` for a method that claims first, without suspending (a request taken on the host's
    /// reactor thread): what memory says. `.execute(previous: nil)` registers the request as
    /// running (`finish` ends it); `.wait` registers `waiter` behind the run in flight.
    func beginInMemory(_ key: String, digest: UInt64, waiter: UInt64) -> Begin {
        state.withLock { state in
            if let stored = state.done[key], let reply = stored.reply { return stored.digest == digest ? .replay(reply) : .mismatch(waiters: []) }
            if let running = state.running[key] {
                guard running.digest == digest else { return .mismatch(waiters: []) }
                state.running[key]?.waiters.append(waiter)
                return .wait
            }
            state.running[key] = (digest, [])
            return .execute(previous: nil)
        }
    }

    /// What a reply or claim the durable store kept for `key` makes of this request.
    private func answer(from previous: StoredReply, _ key: String, digest: UInt64) -> Begin {
        // Duplicates that waited behind this one learn the same.
        guard previous.digest == digest else { return .mismatch(waiters: complete(key, nil)) }
        guard let reply = previous.reply else { return .recover }
        return .execute(previous: reply)
    }

    /// After a run of a claims-first request was refused by the claim already there: what the
    /// durable store says, as `begin` would have said it had it read the store first (a kept
    /// reply to replay, a claim to recover, a key used for another request). nil: the store has
    /// nothing (the claim was pruned meanwhile, or the store failed): the refusal stands, and
    /// the client's retry runs again.
    func afterCollision(_ key: String, digest: UInt64) async -> Begin? {
        guard let store, let previous = await store.load(key) else { return nil }
        return answer(from: previous, key, digest: digest)
    }

    /// Whether the durable store holds `key` (a claim or a reply).
    func storeHolds(_ key: String) async -> Bool {
        guard let store else { return false }
        return await store.load(key) != nil
    }

    /// Replies that say "try again": never kept, never replayed.
    static func isTransient(_ status: StatusCode) -> Bool {
        [.unavailable, .deadlineExceeded, .internal].contains(status)
    }

    /// Records the reply and returns the host keys of duplicates that waited for it.
    /// Replies that say "try again" (UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL) are not kept.
    ///
    /// The durable save is not waited for: the reply goes out as soon as the mutation committed
    /// (with its claim), and the save follows (batched by the store). Until it lands, a retry is
    /// answered from memory; if the process dies first, the claim makes the retry a dry run
    /// (`IdempotencyScope`), so nothing is applied twice. A graceful stop waits for every save
    /// (`flush`). This took one fsync off the latency of every mutation with a key.
    ///
    /// - Parameter durable: the reply was written in its request's transaction
    ///   (`ClaimLedger.keptReply`): kept in memory only, as the store has it already.
    func finish(_ key: String, digest: UInt64, _ reply: Envelope, durable: Bool = false) -> [UInt64] {
        let keep = !Self.isTransient(reply.status)
        let stored = StoredReply(digest: digest, reply: reply)
        let waiters = complete(key, keep ? stored : nil)
        if keep, !durable, let store {
            saves.withLock { $0.pending += 1 }
            store.save(key, stored) { self.saved() }
        }
        return waiters
    }

    /// A run that no task awaits began (a keyed request started on the host's reactor): `flush`
    /// waits for it as for a save, since its reply's save is still to come. `runEnded` once its
    /// reply is handed to `finish` (whose save `flush` then waits for).
    func runStarted() {
        saves.withLock { $0.pending += 1 }
    }

    func runEnded() { saved() }

    private func saved() {
        let done = saves.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.pending -= 1
            guard s.pending == 0 else { return [] }
            defer { s.flushers.removeAll() }
            return s.flushers
        }
        for flusher in done { flusher.resume() }
    }

    private struct Saves {
        var pending = 0
        var flushers: [CheckedContinuation<Void, Never>] = []
    }
    private let saves = Mutex(Saves())

    /// Returns once every reply handed to the durable store so far is saved.
    public func flush() async {
        await withCheckedContinuation { continuation in
            let now = saves.withLock { s -> Bool in
                guard s.pending > 0 else { return true }
                s.flushers.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    private func complete(_ key: String, _ stored: StoredReply?) -> [UInt64] {
        state.withLock { state in
            let waiters = state.running.removeValue(forKey: key)?.waiters ?? []
            guard let stored else { return waiters }
            if state.done.updateValue(stored, forKey: key) == nil {
                state.order.append(key)
                if state.order.count - state.head > capacity {
                    state.done[state.order[state.head]] = nil
                    state.head += 1
                    if state.head > capacity {
                        state.order.removeFirst(state.head)
                        state.head = 0
                    }
                }
            }
            return waiters
        }
    }
}

/// A reply store of either engine (SQLite or PostgreSQL), chosen at start-up.
public struct AnyReplyStore: ReplyStore {
    public let base: any ReplyStore

    public init(_ base: any ReplyStore) { self.base = base }

    public func load(_ key: String) async -> StoredReply? { await base.load(key) }
    public func save(_ key: String, _ stored: StoredReply) async { await base.save(key, stored) }
    public func save(_ key: String, _ stored: StoredReply, then done: @escaping @Sendable () -> Void) {
        base.save(key, stored, then: done)
    }
}
