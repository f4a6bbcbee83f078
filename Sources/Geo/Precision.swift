public import FriensoProto
import GRDB
import Storage
public import Wire

/// Precision per friend: the handlers and the storage of `PrecisionSettings`.
extension GeoService {
    public func setPrecision(_ request: GeoV1.SetPrecisionRequest, _ context: RequestContext) async throws -> GeoV1.GetPrecisionResponse {
        let caller = try context.requireCaller()
        let precision = Precision(request.precision)
        if request.userId == 0 {
            guard let precision else { throw RPCError.invalidArgument("precision: the default must be EXACT, APPROXIMATE, PLACE or HIDDEN") }
            try await store.savePrecision(subject: caller, viewer: 0, precision)
            state.mutex.withLock { $0.precision.set(subject: caller, viewer: 0, precision) }
        } else {
            guard request.userId != caller else { throw RPCError.invalidArgument("user_id: a friend (0 for the default)") }
            guard precision != nil || request.precision == .unspecified else { throw RPCError.invalidArgument("precision: unknown value") }
            // A setting for someone who is not a friend would never apply: refused, so a typo shows.
            guard precision == nil || graph.read({ $0.areFriends(caller, request.userId) }) else {
                throw RPCError.failedPrecondition("user \(request.userId) is not your friend")
            }
            try await store.savePrecision(subject: caller, viewer: request.userId, precision)
            state.mutex.withLock { $0.precision.set(subject: caller, viewer: request.userId, precision) }
        }
        return precisionView(of: caller)
    }

    public func getPrecision(_ request: GeoV1.GetPrecisionRequest, _ context: RequestContext) async throws -> GeoV1.GetPrecisionResponse {
        precisionView(of: try context.requireCaller())
    }

    func precisionView(of user: UInt64) -> GeoV1.GetPrecisionResponse {
        let all = state.mutex.withLock { $0.precision.all(of: user) }
        return GeoV1.GetPrecisionResponse(
            defaultPrecision: (all[0] ?? .exact).proto,
            settings: all.filter { $0.key != 0 }.sorted { $0.key < $1.key }.map { GeoV1.PrecisionSetting(userId: $0.key, precision: $0.value.proto) })
    }
}

extension SQLiteGeoStore {
    static func migratePrecision(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("precision") { db in
            try db.execute(sql: """
                CREATE TABLE precision (subject INTEGER NOT NULL, viewer INTEGER NOT NULL, level INTEGER NOT NULL,
                                        PRIMARY KEY (subject, viewer)) WITHOUT ROWID;
                CREATE INDEX precision_viewer ON precision(viewer);
                """)
        }
    }

    func loadPrecision() throws -> PrecisionSettings {
        try database.read { db in
            PrecisionSettings(try Row.fetchAll(db, sql: "SELECT subject, viewer, level FROM precision") { row -> (subject: UInt64, viewer: UInt64, precision: Precision)? in
                guard let precision = Precision(rawValue: try row[2]) else { return nil }
                return try (subject: row[0], viewer: row[1], precision: precision)
            }.compactMap { $0 })
        }
    }

    func savePrecision(subject: UInt64, viewer: UInt64, _ precision: Precision?) async throws {
        try await database.write { db in
            if let precision {
                try db.run(sql: "INSERT OR REPLACE INTO precision (subject, viewer, level) VALUES (?, ?, ?)", arguments: [subject, viewer, precision.rawValue])
            } else {
                try db.run(sql: "DELETE FROM precision WHERE subject = ? AND viewer = ?", arguments: [subject, viewer])
            }
        }
    }
}
