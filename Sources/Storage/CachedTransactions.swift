import Foundation
public import GRDB

// The statements that open and close a read transaction, a write transaction and a mutation's
// savepoint, from the connection's statement cache. GRDB's `read`, `inTransaction` and
// `inSavepoint` run them through `execute(sql:)`, which compiles the text anew every time under
// GRDB's statement authorizer (a Swift callback per compiled token): two compilations for every
// read, every mutation and every commit, in every service (`docs/benchmarks.md`, issue 16,
// items 17 and 52). `FRIENSO_TX_STATEMENTS=uncached` keeps GRDB's own path, for A/B runs.

@usableFromInline
enum CachedTransactions {
    static let enabled = ProcessInfo.processInfo.environment["FRIENSO_TX_STATEMENTS"] != "uncached"

    /// `value` in a read transaction of a pool reader (WAL: a snapshot; it never waits for the writer).
    static func read<T>(_ pool: DatabasePool, _ value: (Database) throws -> T) throws -> T {
        guard enabled else { return try pool.read(value) }
        return try pool.unsafeRead { db in try inReadTransaction(db, value) }
    }

    /// `value` in a read transaction of `db` (a reader connection outside any transaction).
    static func inReadTransaction<T>(_ db: Database, _ value: (Database) throws -> T) throws -> T {
        guard enabled else {
            var result: T?
            try db.inTransaction(.deferred) {
                result = try value(db)
                return .commit
            }
            return result!
        }
        try db.cachedStatement(sql: "BEGIN DEFERRED TRANSACTION").execute()
        let result: T
        do {
            result = try value(db)
        } catch {
            if db.isInsideTransaction { try? db.cachedStatement(sql: "ROLLBACK TRANSACTION").execute() }
            throw error
        }
        try db.cachedStatement(sql: "COMMIT TRANSACTION").execute()
        return result
    }

    /// `work` in a write transaction of the writer (`BEGIN IMMEDIATE`, as GRDB's `inTransaction`
    /// opens one on a writer): committed on `.commit`; rolled back on `.rollback`, on a throw, and
    /// when the commit itself fails. A transaction SQLite ended by itself inside `work` (on an I/O
    /// error, a full disk) is not committed: the caller gets an error, as GRDB gives
    /// `SQLITE_ABORT`, and none of it is durable.
    static func transaction(_ db: Database, _ work: () throws -> Database.TransactionCompletion) throws {
        guard enabled else { return try db.inTransaction(.immediate, work) }
        try db.cachedStatement(sql: "BEGIN IMMEDIATE TRANSACTION").execute()
        do {
            switch try work() {
            case .commit:
                guard db.isInsideTransaction else { throw StoreInvariant("the transaction ended before its commit: nothing of it was committed") }
                try db.cachedStatement(sql: "COMMIT TRANSACTION").execute()
            case .rollback:
                try db.cachedStatement(sql: "ROLLBACK TRANSACTION").execute()
            }
        } catch {
            // The first error is the one the caller sees; a failed rollback leaves SQLite's own.
            if db.isInsideTransaction { try? db.cachedStatement(sql: "ROLLBACK TRANSACTION").execute() }
            throw error
        }
    }

    /// `work` in a savepoint of the open transaction: released on `.commit`, rolled back (alone)
    /// on `.rollback` or a throw. Outside a transaction it is GRDB's `inTransaction`.
    @usableFromInline
    static func savepoint(_ db: Database, _ work: () throws -> Database.TransactionCompletion) throws {
        guard enabled, db.isInsideTransaction else { return try db.inSavepoint(work) }
        try db.cachedStatement(sql: "SAVEPOINT frienso_mutation").execute()
        let completion: Database.TransactionCompletion
        do {
            completion = try work()
        } catch {
            try? rollBack(db)
            throw error
        }
        switch completion {
        case .commit:
            // A failure inside may have ended the whole transaction (SQLite rolls back on some
            // errors): then there is no savepoint to release, and the batch fails as a whole.
            guard db.isInsideTransaction else { throw StoreInvariant("the transaction ended inside a mutation") }
            try db.cachedStatement(sql: "RELEASE SAVEPOINT frienso_mutation").execute()
        case .rollback:
            try rollBack(db)
        }
    }

    private static func rollBack(_ db: Database) throws {
        guard db.isInsideTransaction else { return }
        try db.cachedStatement(sql: "ROLLBACK TRANSACTION TO SAVEPOINT frienso_mutation").execute()
        try db.cachedStatement(sql: "RELEASE SAVEPOINT frienso_mutation").execute()
    }
}

/// The statements that open and close the read transactions of one reader connection
/// (`InPlaceReaders`), compiled once on it and stepped by hand. Through the connection's
/// statement cache, each was found by hashing its text (about 930 instructions a lookup), then
/// run through GRDB's `execute`, which checks the statement against suspension, observation and
/// aborted transactions on every run and reads the clock when a transaction begins: two
/// statements on every read of every service, about 4,100 instructions a read together
/// (`docs/benchmarks.md`, issue 16, item 118). Stepped as `StatementSteps` steps the in-place
/// reads (`BoundStatements.swift` says what of GRDB's stepping that skips, and why that is safe
/// here); GRDB's `isInsideTransaction` asks SQLite, so it stays true. Used only by whoever holds
/// the connection, inside its `inDatabase`, and made on that connection.
final class ReadTransactionStatements {
    private let begin: Statement
    private let commit: Statement
    private let rollback: Statement

    init(_ db: Database) throws {
        begin = try db.makeStatement(sql: "BEGIN DEFERRED TRANSACTION")
        commit = try db.makeStatement(sql: "COMMIT TRANSACTION")
        rollback = try db.makeStatement(sql: "ROLLBACK TRANSACTION")
    }

    /// `value` in a read transaction of `db` (the connection these statements were made on,
    /// outside any transaction): committed after it, rolled back when it throws or when the
    /// commit fails, so the connection is never left inside a transaction.
    func run<T>(_ db: Database, _ value: (Database) throws -> T) throws -> T {
        try StatementSteps.run(begin)
        let result: T
        do {
            result = try value(db)
            try StatementSteps.run(commit)
        } catch {
            if db.isInsideTransaction { try? StatementSteps.run(rollback) }
            throw error
        }
        return result
    }
}

