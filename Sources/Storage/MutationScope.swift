public import GRDB
public import Wire

/// The idempotent request a transaction serves, taken from the task before the work moves to the
/// writer's queue (task-locals do not follow it there).
public struct MutationScope: Sendable {
    let idempotency: IdempotencyScope?

    @usableFromInline
    init() {
        idempotency = IdempotencyScope.current
    }

    /// For a mutation made off a task (the request's scope handed over explicitly).
    @usableFromInline
    init(idempotency: IdempotencyScope?) {
        self.idempotency = idempotency
    }

    /// Whether this is the dry run of a request applied before a crash (writes are rolled back).
    public var isDryRun: Bool { idempotency?.dryRun ?? false }

    /// Runs `body` as one transaction carrying the request's claim.
    /// - Returns: true when it committed; false in a dry run, where it was rolled back.
    /// - Throws: in a dry run whose transaction would have changed rows, ALREADY_EXISTS (see `ServiceDatabase`).
    @discardableResult
    public func transaction(_ db: Database, _ body: () throws -> Void) throws -> Bool {
        try atomically(db, savepoint: false, body)
    }

    /// The same inside the write queue's batch transaction: a savepoint of its own, released
    /// into the batch (or rolled back alone in a dry run or on a throw).
    @usableFromInline
    func savepoint(_ db: Database, _ body: () throws -> Void) throws {
        _ = try atomically(db, savepoint: true, body)
    }

    private func atomically(_ db: Database, savepoint: Bool, _ body: () throws -> Void) throws -> Bool {
        let idempotency = idempotency
        var committed = true
        var changedInDryRun = false
        let work = { () throws -> Database.TransactionCompletion in
            // The claim first, as on PostgreSQL: a run of a request applied before is refused
            // before its handler's own checks can answer for it (a registration that meets its
            // first run's row would say "username: already registered"), which a method that
            // claims first relies on (`MethodRouter.claimFirst`). Rolled back with the rest on a
            // throw; the ledger counts it only once the body went through.
            let claimed = try idempotency.map { $0.dryRun ? false : try SQLiteReplyStore.claim(db, $0) } ?? false
            let before = db.totalChangesCount
            try body()
            guard let idempotency else { return .commit }
            if idempotency.dryRun {
                committed = false
                changedInDryRun = db.totalChangesCount != before
                return .rollback
            }
            if claimed { idempotency.claims.wrote() }
            return .commit
        }
        if savepoint { try CachedTransactions.savepoint(db, work) } else { try CachedTransactions.transaction(db, work) }
        if changedInDryRun, let idempotency { throw idempotency.appliedOnceAlready }
        return committed
    }
}
