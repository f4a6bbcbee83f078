import Foundation
import GRDB
import Storage

/// Where location updates wait for the commit that makes them durable, in batches: a batch is
/// decided in memory (`LocationBatchSteps.prepare`), written (`GeoStorage.write`), then shown
/// (`finish`), in commit order.
protocol LocationWriter: Sendable {
    /// `done` runs on the commit's queue once the batch holding `update` committed (or failed):
    /// whether it became the user's latest fix.
    func submit(_ update: LocationUpdate, then done: @escaping @Sendable (Result<Bool, any Error>) -> Void)
    /// Batches, updates in them, and nanoseconds spent committing them (for the benchmark).
    var counts: (batches: Int, items: Int, commitNanos: Int) { get }
}

/// A batch of location updates decided in memory, before it is written.
struct PreparedLocations: Sendable {
    /// Per update: whether it replaces the user's latest fix (`GeoState.accept`).
    var replaces: [Bool]
    var plan: GeoState.WritePlan
    /// The fold's next slice (`HistoryFolding`), written with the batch.
    var chunk: HistoryFolding.Chunk?
    var fold: FoldWrite?
}

/// The two halves of a batch around its write, which `GeoService` supplies and the store's writer
/// calls in commit order.
struct LocationBatchSteps: Sendable {
    var prepare: @Sendable ([LocationUpdate]) -> PreparedLocations
    /// Once the batch committed, with its history ids and the place events written.
    var finish: @Sendable ([LocationUpdate], PreparedLocations, [Int64], [PlaceEventRecord]) -> Void
}

/// A writer with a group commit of its own: each batch is a transaction of its own (PostgreSQL,
/// and SQLite with `FRIENSO_GEO_LOCATION_COMMIT=own`, the path before item 69, for A/B runs).
struct OwnCommitLocationWriter: LocationWriter {
    let commits: GroupCommit<LocationUpdate, Bool>

    init(store: any GeoStorage, steps: LocationBatchSteps) {
        commits = GroupCommit(label: "geo-location-writer") { batch in
            let prepared = steps.prepare(batch)
            let (ids, told) = try store.write(batch, fold: prepared.fold, unrecorded: prepared.plan.unrecorded, placeEvents: prepared.plan.told)
            steps.finish(batch, prepared, ids, told)
            return prepared.replaces
        }
    }

    func submit(_ update: LocationUpdate, then done: @escaping @Sendable (Result<Bool, any Error>) -> Void) {
        commits.submit(update, then: done)
    }

    var counts: (batches: Int, items: Int, commitNanos: Int) {
        (commits.batches.load(ordering: .relaxed), commits.items.load(ordering: .relaxed), commits.commitNanos.load(ordering: .relaxed))
    }
}

/// A writer whose batches ride in the service database's group commit (SQLite): one transaction
/// and one fsync with the check-ins, grants and replies' saves waiting at the same time
/// (`BatchedWrites`; `docs/benchmarks.md`, issue 16, item 69).
struct SharedCommitLocationWriter: LocationWriter {
    let writes: BatchedWrites<LocationUpdate, Bool>

    init(database: ServiceDatabase, steps: LocationBatchSteps, write: @escaping @Sendable ([LocationUpdate], PreparedLocations, Database) throws -> (ids: [Int64], placeEvents: [PlaceEventRecord])) {
        writes = database.batchedWrites(label: "geo-locations") { batch, db in
            let prepared = steps.prepare(batch)
            let (ids, told) = try write(batch, prepared, db)
            return (prepared.replaces, { steps.finish(batch, prepared, ids, told) })
        }
    }

    func submit(_ update: LocationUpdate, then done: @escaping @Sendable (Result<Bool, any Error>) -> Void) {
        writes.submit(update, then: done)
    }

    var counts: (batches: Int, items: Int, commitNanos: Int) {
        (writes.batches.load(ordering: .relaxed), writes.items.load(ordering: .relaxed), writes.commitNanos.load(ordering: .relaxed))
    }
}

/// `FRIENSO_GEO_LOCATION_COMMIT=own`: SQLite commits location batches on their own, as before
/// item 69 (the launcher's children inherit it).
let locationsCommitOnTheirOwn = ProcessInfo.processInfo.environment["FRIENSO_GEO_LOCATION_COMMIT"] == "own"
