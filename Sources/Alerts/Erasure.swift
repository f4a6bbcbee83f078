public import FriensoProto
import Storage
public import Wire

/// Erasing a deleted account (accounts calls `EraseUser` until it succeeds): the person's watch
/// sessions and helpNow alerts with their recipients and prompts, their answers in other
/// people's, grants either way, devices, dismissed circle requests, every delivery to them or
/// about them (with what the recording provider kept of it), and kept replies; one transaction.
extension AlertsService {
    public func eraseUser(_ request: AlertsV1.EraseUserRequest, _ context: RequestContext) async throws -> AlertsV1.EraseUserResponse {
        try Erasure.check(user: request.userId, traces: request.traces)
        guard request.addresses.count <= 8, request.addresses.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 320 }) else {
            throw RPCError.invalidArgument("addresses: at most 8, each 1-320 bytes")
        }
        circleCopy.forget(request.userId) // their invited numbers leave memory too
        let erased = try await store.erase(request.userId, addresses: request.addresses, traces: request.traces)
        try await store.scrubErasedRows()
        if erased > 0 { context.logger.info("erased a deleted account", metadata: ["user-id": "\(request.userId)", "rows": "\(erased)"]) }
        return AlertsV1.EraseUserResponse(erased: UInt32(clamping: erased))
    }
}
