import Foundation
public import FriensoProto
public import Wire

/// Photos in chunks, as the media contract asks: the size declared first (checked against the
/// cap and the quotas before a byte moves), chunks in order, each safe to resend, then finish.
extension FriensoClient {
    public func uploadPhoto(_ bytes: [UInt8], purpose: MediaV1.Purpose, placeID: UInt64 = 0) async throws(RPCError) -> MediaV1.FinishUploadResponse {
        let start = try await call(MediaV1.MediaService.startUpload,
                                   MediaV1.StartUploadRequest(purpose: purpose, placeId: placeID, sizeBytes: UInt64(bytes.count)), mutation: true)
        let chunk = max(1, Int(start.chunkBytes))
        var offset = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + chunk)
            _ = try await call(MediaV1.MediaService.uploadChunk,
                               MediaV1.UploadChunkRequest(uploadId: start.uploadId, offset: UInt64(offset), data: Array(bytes[offset..<end])),
                               idempotent: true)
            offset = end
        }
        return try await call(MediaV1.MediaService.finishUpload, MediaV1.FinishUploadRequest(uploadId: start.uploadId), idempotent: true)
    }

    /// The whole photo and its metadata.
    public func downloadPhoto(_ mediaID: String) async throws(RPCError) -> (item: MediaV1.MediaItem, bytes: [UInt8]) {
        var bytes: [UInt8] = []
        while true {
            let reply = try await call(MediaV1.MediaService.getPhoto, MediaV1.GetPhotoRequest(mediaId: mediaID, offset: UInt64(bytes.count)),
                                       idempotent: true)
            if bytes.isEmpty { bytes.reserveCapacity(Int(reply.item?.sizeBytes ?? 0)) }
            bytes += reply.data
            if reply.eof || reply.data.isEmpty { return (reply.item ?? MediaV1.MediaItem(), bytes) }
        }
    }
}
