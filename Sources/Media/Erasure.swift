public import FriensoProto
import Storage
public import Wire

/// Erasing a deleted account (accounts calls `EraseUser` until it succeeds): every photo the
/// person owns (its bytes go with the last reference: identical bytes another user uploaded stay
/// theirs), their profile and check-in pointers, their uploads with the bytes received, and kept
/// replies; one transaction, then what the engine may still hold of the rows is scrubbed.
extension MediaService {
    public func eraseUser(_ request: MediaV1.EraseUserRequest, _ context: RequestContext) async throws -> MediaV1.EraseUserResponse {
        try Erasure.check(user: request.userId, traces: request.traces)
        let erased = try await store.erase(request.userId, traces: request.traces)
        try await store.scrubErased()
        if erased > 0 { context.logger.info("erased a deleted account", metadata: ["user-id": "\(request.userId)", "rows": "\(erased)"]) }
        return MediaV1.EraseUserResponse(erased: UInt32(clamping: erased))
    }
}
