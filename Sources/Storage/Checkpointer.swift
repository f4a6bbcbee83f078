import Dispatch
import Foundation
import GRDB
import GRDBSQLite
import Synchronization

/// WAL checkpoints off the commit path. SQLite's automatic checkpoint runs inside the commit that
/// crosses 1,000 WAL pages: that commit (and every caller waiting on its group) pays for copying
/// the pages into the database file and fsyncing it. In `frienso-bench alerts` that was the
/// whole of helpNow's p99 (a 20 ms write behind a 4 ms median). Here the writer connection only
/// notes the WAL's size (`sqlite3_wal_hook`, which replaces the automatic checkpoint), and a
/// connection of our own runs `PRAGMA wal_checkpoint(PASSIVE)` on a queue of its own: it takes
/// no write lock, so commits go on meanwhile. Durability is unchanged: a commit is durable once
/// its WAL frames are fsynced (`synchronous = FULL`); a checkpoint only moves them.
///
/// Hand-written because neither GRDB nor SQLite offers a background checkpointer (GRDB's
/// `checkpoint` runs on the writer, which would hold commits back just the same).
final class Checkpointer: Sendable {
    /// WAL pages after which a checkpoint is asked for (SQLite's own default).
    static let pages: Int32 = 1_000

    /// `FRIENSO_CHECKPOINTS=each-commit` asks after every commit past the threshold, as before,
    /// for A/B runs.
    static let eachCommit = ProcessInfo.processInfo.environment["FRIENSO_CHECKPOINTS"] == "each-commit"

    /// What the writer's hook signals: a weak link, so a connection that outlives its
    /// `ServiceDatabase` (anyone may hold `pool`) signals nobody.
    final class Signal: @unchecked Sendable {
        private let target = Mutex<Weak>(Weak())
        struct Weak { weak var checkpointer: Checkpointer? }
        /// The WAL's size (frames) when a checkpoint was last asked for.
        private let askedAt = Mutex<Int32>(0)
        func attach(_ checkpointer: Checkpointer) { target.withLock { $0.checkpointer = checkpointer } }

        func walGrew(to pages: Int32) {
            guard due(pages) else { return }
            target.withLock { $0.checkpointer }?.request()
        }

        /// Whether a WAL of `pages` frames after a commit asks for a checkpoint: once per
        /// `Checkpointer.pages` new frames. SQLite reuses the WAL from its start only when a
        /// commit begins after a complete checkpoint with no reader on the old frames; under a
        /// steady read load that is rare, so the WAL stays past the threshold, and asking after
        /// every commit ran a checkpoint (and its fsyncs of the WAL and the database file) every
        /// few commits: in `stack`, alerts synced its database file 21 times a second.
        func due(_ pages: Int32) -> Bool {
            askedAt.withLock { asked in
                if pages < asked { asked = 0 } // the WAL started over
                guard pages >= Checkpointer.pages, Checkpointer.eachCommit || pages - asked >= Checkpointer.pages else { return false }
                asked = pages
                return true
            }
        }
    }

    /// WAL frames past which a checkpoint also restarts the log (`wal_checkpoint(RESTART)`):
    /// ~32 MiB of 4 KiB pages. See `checkpoint()`.
    static let restartPages = 8_000
    /// `FRIENSO_WAL_RESTART=off` runs passive checkpoints only, as before, for A/B runs.
    static let restarts = ProcessInfo.processInfo.environment["FRIENSO_WAL_RESTART"] != "off"

    private let path: String
    private let restartPages: Int
    /// Runs a restarting checkpoint on the writer connection (set once the pool is open).
    private let restartOnWriter = Mutex<(@Sendable () throws -> Void)?>(nil)
    private let queue = DispatchQueue(label: "frienso-checkpointer")
    private let scheduled = Atomic<Bool>(false)
    private let connection = Mutex<DatabaseQueue?>(nil)
    /// Checkpoints run, and those of them that restarted the WAL (for tests).
    let runs = Atomic<Int>(0), restartsRun = Atomic<Int>(0)

    init(path: String, restartPages: Int = Checkpointer.restartPages) {
        self.path = path
        self.restartPages = restartPages
    }

    /// How to restart the log: on the writer connection, between its commits (see `checkpoint()`).
    func restart(using body: @escaping @Sendable () throws -> Void) {
        restartOnWriter.withLock { $0 = body }
    }

    /// Installs the hook on a connection (every connection of the pool: only the writer commits).
    static func install(on db: Database, signal: Signal) {
        guard let handle = db.sqliteConnection else { return }
        sqlite3_wal_hook(handle, { context, _, _, pages in
            if let context { Unmanaged<Signal>.fromOpaque(context).takeUnretainedValue().walGrew(to: pages) }
            return SQLITE_OK
        }, Unmanaged.passUnretained(signal).toOpaque())
    }

    /// At most one checkpoint scheduled at a time; the WAL keeps growing meanwhile, which is fine.
    func request() {
        guard !scheduled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        queue.async { [self] in
            defer { scheduled.store(false, ordering: .releasing) }
            checkpoint()
        }
    }

    /// A passive checkpoint now, on this object's own connection; and when the WAL has grown past
    /// `restartPages`, a restarting one.
    ///
    /// Under a steady load a passive checkpoint never catches up (commits append while it copies,
    /// and some reader is always on the newer frames), so SQLite never starts the log over and
    /// the WAL grew without bound: in `stack`, alerts' and geo's grew by 30–40 MB a second, to
    /// gigabytes over a long run (disk, page cache, and every reader's search through a WAL
    /// index of as many hash tables). `RESTART` holds new writers for as long as it copies what
    /// the passive pass left (little) and waits for readers to leave the old frames (a read
    /// transaction here lasts microseconds); the next commit then writes the log from its start,
    /// over the same file, which `journal_size_limit` (`ServiceDatabase.open`) trims if a burst
    /// made it larger. It runs on the writer connection, between two commits: from a connection
    /// of its own it would have to win the write lock from a writer that commits back to back.
    private func checkpoint() {
        do {
            let frames = try connection.withLock { connection -> Int in
                if connection == nil {
                    var configuration = Configuration()
                    configuration.busyMode = .timeout(5)
                    configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
                    connection = try DatabaseQueue(path: path, configuration: configuration)
                }
                return try connection?.writeWithoutTransaction { db in try db.checkpoint(.passive).walFrameCount } ?? 0
            }
            runs.add(1, ordering: .relaxed)
            guard Self.restarts, frames >= restartPages, let restart = restartOnWriter.withLock({ $0 }) else { return }
            try restart()
            restartsRun.add(1, ordering: .relaxed)
        } catch {
            // Not fatal (a reader held the old frames past the wait): the next commit past the
            // threshold asks again; the WAL only grows meanwhile.
        }
    }
}
