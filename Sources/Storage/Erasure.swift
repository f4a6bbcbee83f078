import Foundation
public import Logging
public import Wire

/// What every service's `EraseUser` shares (a deleted account's data, see accounts'
/// `Erasure.swift`): the request's checks, and what follows the deletion.
public enum Erasure {
    /// Refuses a request without a user or with implausible traces.
    public static func check(user: UInt64, traces: [String]) throws(RPCError) {
        guard user != 0 else { throw .invalidArgument("user_id: required") }
        guard traces.count <= 16, traces.allSatisfy({ $0.utf8.count <= 320 }) else {
            throw .invalidArgument("traces: at most 16, each at most 320 bytes")
        }
    }

    /// Once the rows are deleted (zeroed in the file: `secure_delete`): truncates the WAL, whose
    /// older frames may still hold them, and logs how many rows went.
    public static func finish(_ database: ServiceDatabase, user: UInt64, erased: Int, logger: Logger) async throws {
        try await database.truncateWAL()
        if erased > 0 { logger.info("erased a deleted account", metadata: ["user-id": "\(user)", "rows": "\(erased)"]) }
    }
}
