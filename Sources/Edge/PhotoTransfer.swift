import Foundation
import FriensoProto
import HTTPTypes
import Hummingbird
import NIOCore
import Wire

/// Photos as plain HTTP bodies: `PUT /v1/photos` uploads one whole (the edge sends media the
/// chunks it asks for), `GET /v1/photos/<id>` downloads one with its type, `ETag` and
/// `Cache-Control: private`. Every chunk is one request through the core, so media's rules
/// (who may read, size caps, quota, upload rate) and the rate limit apply to each as they do to
/// the ZeroMQ client's.
struct PhotoTransfer {
    let routes: EdgeRoutes

    /// `PUT /v1/photos?purpose=check_in|profile|venue[&placeId=N]`, the image as the body.
    /// Answers 201 with `FinishUploadResponse` and `Location: /v1/photos/<id>`.
    func upload(_ request: Request, _ context: EdgeContext) async throws -> Response {
        let query = request.uri.queryParameters
        guard let purpose = Self.purpose(query.get("purpose")) else {
            return routes.error(.invalidArgument, "purpose: one of check_in, profile, venue")
        }
        var placeID: UInt64 = 0
        if let text = query.get("placeId") ?? query.get("place_id") {
            guard let value = UInt64(text) else { return routes.error(.invalidArgument, "placeId: a decimal id") }
            placeID = value
        }
        var request = request
        let body: ByteBuffer
        do {
            body = try await request.collectBody(upTo: routes.config.maxPhotoBytes)
        } catch {
            return EdgeRoutes.errorResponse(status: .contentTooLarge, .invalidArgument, "a photo is at most \(routes.config.maxPhotoBytes) bytes")
        }
        let bytes = Array(body.readableBytesView)
        guard !bytes.isEmpty else { return routes.error(.invalidArgument, "an empty body: send the image's bytes") }
        do throws(RPCError) {
            // One key for the whole transfer: the client's, or one made here so that the edge's
            // own retries of a step cannot start a second upload.
            let given = try EdgeRoutes.idempotencyKey(request)
            let base = given.isEmpty ? "edge-\(UUID().uuidString)" : given
            let started: MediaV1.StartUploadResponse = try await call(
                MediaV1.MediaService.startUpload,
                MediaV1.StartUploadRequest(purpose: purpose, placeId: placeID, sizeBytes: UInt64(bytes.count)),
                request, context, key: "\(base)/start")
            let step = max(1, Int(started.chunkBytes))
            var offset = 0
            while offset < bytes.count {
                let end = min(bytes.count, offset + step)
                _ = try await call(MediaV1.MediaService.uploadChunk,
                                   MediaV1.UploadChunkRequest(uploadId: started.uploadId, offset: UInt64(offset), data: Array(bytes[offset..<end])),
                                   request, context, key: "\(base)/chunk/\(offset)")
                offset = end
            }
            let finished = try await call(MediaV1.MediaService.finishUpload, MediaV1.FinishUploadRequest(uploadId: started.uploadId),
                                          request, context, key: "\(base)/finish")
            var response = routes.json(.created, finished.jsonValue)
            if let id = finished.item?.mediaId { response.headers[.location] = "/v1/photos/\(id)" }
            return response
        } catch {
            return routes.error(error.code, error.message)
        }
    }

    /// `GET /v1/photos/<id>`: the bytes, streamed from media a chunk at a time.
    func download(_ request: Request, _ context: EdgeContext) async throws -> Response {
        let id = context.parameters.get("mediaId") ?? ""
        let conditional = request.headers[.ifNoneMatch]
        let first: MediaV1.GetPhotoResponse
        do throws(RPCError) {
            // A conditional request reads one byte first: enough to learn the ETag.
            first = try await call(MediaV1.MediaService.getPhoto, MediaV1.GetPhotoRequest(mediaId: id, maxBytes: conditional == nil ? 0 : 1),
                                   request, context, key: "")
        } catch {
            return routes.error(error.code, error.message)
        }
        guard let item = first.item else { return routes.error(.internal, "media answered no item") }
        let etag = "\"\(item.sha256)\""
        var headers: HTTPFields = [.eTag: etag, .cacheControl: "private, max-age=3600"]
        if let conditional, conditional.split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == etag || $0.trimmingCharacters(in: .whitespaces) == "*" }) {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentType] = item.mimeType.isEmpty ? "application/octet-stream" : item.mimeType
        headers[.contentLength] = String(item.sizeBytes)
        let transfer = self
        let size = item.sizeBytes
        let start = conditional == nil ? first : nil
        return Response(status: .ok, headers: headers, body: .init(contentLength: Int(size)) { writer in
            var offset: UInt64 = 0
            if let start {
                try await writer.write(ByteBuffer(bytes: start.data))
                offset = UInt64(start.data.count)
                if start.eof { try await writer.finish(nil); return }
            }
            while offset < size {
                let next = try await transfer.call(MediaV1.MediaService.getPhoto, MediaV1.GetPhotoRequest(mediaId: id, offset: offset),
                                                   request, context, key: "")
                guard !next.data.isEmpty else { break }
                try await writer.write(ByteBuffer(bytes: next.data))
                offset += UInt64(next.data.count)
                if next.eof { break }
            }
            try await writer.finish(nil)
        })
    }

    private func call<Req, Resp>(_ method: RPCMethod<Req, Resp>, _ message: Req, _ request: Request, _ context: EdgeContext,
                                 key: String) async throws(RPCError) -> Resp {
        let reply = try await routes.call(method.fullName, payload: message.serializedBytes(), request: request, context: context, idempotencyKey: key)
        guard reply.status == .ok else { throw RPCError(reply.status, reply.statusMessage) }
        do {
            return try Resp(serializedBytes: reply.payload)
        } catch {
            throw RPCError.internal("the reply of \(method.fullName) could not be read")
        }
    }

    static func purpose(_ text: String?) -> MediaV1.Purpose? {
        switch text?.lowercased() {
        case "check_in", "checkin", "purpose_check_in": .checkIn
        case "profile", "purpose_profile": .profile
        case "venue", "purpose_venue": .venue
        default: nil
        }
    }
}
