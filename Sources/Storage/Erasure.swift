public import Wire

/// What every service's `EraseUser` shares (a deleted account's data, see accounts'
/// `Erasure.swift`): the request's checks (each store then scrubs what its engine may still
/// hold of the deleted rows: `scrubErased`).
public enum Erasure {
    /// Refuses a request without a user or with implausible traces.
    public static func check(user: UInt64, traces: [String]) throws(RPCError) {
        guard user != 0 else { throw .invalidArgument("user_id: required") }
        guard traces.count <= 16, traces.allSatisfy({ $0.utf8.count <= 320 }) else {
            throw .invalidArgument("traces: at most 16, each at most 320 bytes")
        }
    }
}
