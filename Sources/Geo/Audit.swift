public import FriensoProto
import GRDB
public import Logging
public import ServiceLifecycle
import Storage
import Synchronization
public import Wire

/// "Who saw my location": every read of someone's location by someone else, noted in memory,
/// counted per (subject, viewer, hour, kind) and added to the `audit` table every few seconds, so
/// a read costs an append, not a write. A crash loses at most the last flush interval's
/// counts (the audit tells who looked, roughly how often; it is not a ledger). Rows older than
/// the retention are pruned.
final class AuditLog: Sendable {
    struct Key: Hashable, Sendable {
        var subject: UInt64
        var viewer: UInt64
        var hour: Int64
        var kind: Int32
        var link: UInt64

        /// Two words into the hasher instead of five (the flush hashes a million keys a second
        /// under load); equality still compares every field.
        func hash(into hasher: inout Hasher) {
            hasher.combine(subject &* 0x9E37_79B9_7F4A_7C15 ^ viewer)
            hasher.combine(UInt64(bitPattern: hour) ^ UInt64(UInt32(bitPattern: kind)) << 56 ^ link &* 0xC2B2_AE3D_27D4_EB4F)
        }
    }

    /// One read as it happened: one viewer saw several subjects, or several viewers one subject.
    /// Appending it is all a request pays; counting happens when the log is drained (off the
    /// request path: the per-key dictionary cost ~15% of friends' locations when done inline).
    private struct Read: Sendable {
        var one: UInt64
        var many: [UInt64]
        var oneIsViewer: Bool
        var hour: Int64
        var kind: Int32
        var link: UInt64
    }

    let enabled: Bool
    private let reads = Mutex<[Read]>([])
    /// Counts drained but not yet written (a failed flush puts them back here).
    private let carried = Mutex<[Key: UInt32]>([:])

    init(enabled: Bool) { self.enabled = enabled }

    static func hour(_ ms: Int64) -> Int64 { ms - ((ms % 3_600_000) + 3_600_000) % 3_600_000 }

    /// `viewer` saw each of `subjects` (never counted: seeing yourself).
    func record(subjects: some Sequence<UInt64>, viewer: UInt64, kind: GeoV1.AuditKind, at: Int64, link: UInt64 = 0) {
        guard enabled else { return }
        let many = Array(subjects)
        guard !many.isEmpty else { return }
        let read = Read(one: viewer, many: many, oneIsViewer: true, hour: Self.hour(at), kind: kind.rawValue, link: link)
        reads.withLock { $0.append(read) }
    }

    /// Each of `viewers` saw `subject`.
    func record(subject: UInt64, viewers: some Sequence<UInt64>, kind: GeoV1.AuditKind, at: Int64) {
        guard enabled else { return }
        let many = Array(viewers)
        guard !many.isEmpty else { return }
        let read = Read(one: subject, many: many, oneIsViewer: false, hour: Self.hour(at), kind: kind.rawValue, link: 0)
        reads.withLock { $0.append(read) }
    }

    /// Everything recorded since the last drain, counted per key.
    func drain() -> [Key: UInt32] {
        let taken = reads.withLock { r in defer { r.removeAll(keepingCapacity: true) }; return r }
        var counts = carried.withLock { c in defer { c.removeAll() }; return c }
        for read in taken {
            for other in read.many {
                let (subject, viewer) = read.oneIsViewer ? (other, read.one) : (read.one, other)
                guard subject != viewer else { continue }
                counts[Key(subject: subject, viewer: viewer, hour: read.hour, kind: read.kind, link: read.link), default: 0] += 1
            }
        }
        return counts
    }

    /// A deleted account: its counts, either way, are not written.
    func forget(_ user: UInt64) {
        let counts = drain().filter { $0.key.subject != user && $0.key.viewer != user }
        putBack(counts)
    }

    /// Flushes run one after another (`GeoService.flushAudit`).
    let flushes = AsyncSerial()

    /// Counts taken but not written (for a failed flush to put back).
    func putBack(_ counts: [Key: UInt32]) {
        carried.withLock { c in for (k, n) in counts { c[k, default: 0] += n } }
    }
}

extension GeoService {
    /// Writes the counts taken since the last flush. - Returns: rows touched.
    @discardableResult
    public func flushAudit() async throws -> Int {
        // One flush at a time: a listing's flush that found nothing to drain because the
        // periodic flush had just taken it must still wait for that flush's write, or the
        // listing reads before those counts are in (seen: a place alert missing from `audit`).
        try await audit.flushes.run {
            let counts = audit.drain()
            guard !counts.isEmpty else { return 0 }
            do {
                try await store.addAudit(counts)
            } catch {
                audit.putBack(counts)
                throw error
            }
            return counts.count
        }
    }

    public func pruneAudit() async throws -> Int {
        try await store.pruneAudit(before: now() - config.auditRetention.wholeMilliseconds)
    }

    public func listAudit(_ request: GeoV1.ListAuditRequest, _ context: RequestContext) async throws -> GeoV1.ListAuditResponse {
        let caller = try context.requireCaller()
        let limit = request.limit == 0 ? 1_000 : Int(request.limit)
        guard (1...5_000).contains(limit) else { throw RPCError.invalidArgument("limit: 1-5,000") }
        try await flushAudit() // what was seen a moment ago is in the answer
        return GeoV1.ListAuditResponse(entries: try await store.audit(of: caller, since: request.sinceMs, limit: limit),
                                       retentionDays: config.auditRetention.wholeMilliseconds / 86_400_000)
    }
}

/// Flushes the audit counts every `interval` (and once more on the way out), prunes them hourly.
public final class AuditWriter: Service, Sendable {
    private let service: GeoService
    private let interval: Duration
    private let logger: Logger

    public init(service: GeoService, interval: Duration = .seconds(2), logger: Logger) {
        self.service = service
        self.interval = interval
        self.logger = logger
    }

    public func run() async throws {
        let service = service, interval = interval, logger = logger
        await cancelWhenGracefulShutdown {
            var lastPrune = ContinuousClock.now.advanced(by: .seconds(-7_200))
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                do {
                    try await service.flushAudit()
                    if lastPrune.duration(to: .now) > .seconds(3_600) {
                        let pruned = try await service.pruneAudit()
                        if pruned > 0 { logger.info("audit pruned", metadata: ["rows": "\(pruned)"]) }
                        lastPrune = .now
                    }
                } catch {
                    logger.error("audit flush failed; kept for the next one", metadata: ["error": "\(error)"])
                }
            }
        }
        _ = try? await service.flushAudit()
    }
}

extension SQLiteGeoStore {
    static func migrateAudit(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("audit") { db in
            try db.execute(sql: """
                CREATE TABLE audit (subject INTEGER NOT NULL, viewer INTEGER NOT NULL, hour INTEGER NOT NULL, kind INTEGER NOT NULL,
                                    link INTEGER NOT NULL, count INTEGER NOT NULL, PRIMARY KEY (subject, hour, viewer, kind, link)) WITHOUT ROWID;
                CREATE INDEX audit_viewer ON audit(viewer);
                CREATE INDEX audit_hour ON audit(hour);
                """)
        }
    }

    func addAudit(_ counts: [AuditLog.Key: UInt32]) async throws {
        try await database.write { db in
            let upsert = try db.cachedStatement(sql: """
                INSERT INTO audit (subject, viewer, hour, kind, link, count) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (subject, hour, viewer, kind, link) DO UPDATE SET count = count + excluded.count
                """)
            for (k, n) in counts { try db.run(upsert, binding: k.subject, k.viewer, k.hour, k.kind, k.link, n) }
        }
    }

    func pruneAudit(before cutoff: Int64) async throws -> Int {
        try await database.write { db in
            try db.run(sql: "DELETE FROM audit WHERE hour < ?", arguments: [AuditLog.hour(cutoff)])
            return db.changesCount
        }
    }

    func audit(of subject: UInt64, since: Int64, limit: Int) async throws -> [GeoV1.AuditEntry] {
        try await database.read { db in
            try Row.fetchAll(db, sql: """
                SELECT viewer, kind, hour, count, link FROM audit WHERE subject = ? AND hour >= ? ORDER BY hour DESC, count DESC, viewer LIMIT ?
                """, arguments: [subject, AuditLog.hour(since), limit]) {
                try GeoV1.AuditEntry(viewerId: $0[0], kind: GeoV1.AuditKind(rawValue: $0[1]), hourStartMs: $0[2], count: UInt32(clamping: $0[3] as Int64),
                                 linkId: $0[4])
            }
        }
    }
}

/// Runs async work one piece at a time, in arrival order (a lock that suspends instead of blocking).
final class AsyncSerial: Sendable {
    private struct State {
        var busy = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    func run<T>(_ body: () async throws -> T) async rethrows -> T {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                guard s.busy else { s.busy = true; return true }
                s.waiting.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
        defer {
            let next = state.withLock { s -> CheckedContinuation<Void, Never>? in
                guard !s.waiting.isEmpty else { s.busy = false; return nil }
                return s.waiting.removeFirst()
            }
            next?.resume()
        }
        return try await body()
    }
}
