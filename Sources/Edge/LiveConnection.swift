import Foundation
import FriensoProto
import Gateway
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import Logging
import Wire

/// `GET /v1/events` upgraded to a WebSocket: the caller's live events as JSON text frames.
///
/// - Authentication at the upgrade: `Authorization: Bearer <token>`, or (browsers) the
///   subprotocols `frienso.v1, frienso.bearer.<token in base64url>`; no valid session, no upgrade
///   (the plain GET then answers 401). The session is checked again at every heartbeat: a logout
///   or a revocation closes the socket (code 4401).
/// - Frames: first `{"type":"hello","epoch":E,"sequence":S,"heartbeatMs":H}`; then
///   `{"type":"event","epoch":E,"sequence":N,"event":"geo.Location","data":{…}}` with N one more
///   than the previous; `{"type":"heartbeat","sequence":S}` every H ms (S: the last event's
///   number, so a client can tell it missed one).
/// - Resuming: `?epoch=E&after=N` replays what came after N when the log still has it; otherwise
///   `{"type":"reset",…}` says to fetch the state again. A client too slow to read its frames is
///   closed (code 4008) and resumes.
struct LiveConnection: Sendable {
    let routes: EdgeRoutes

    static let revokedCode = 4401
    static let tooSlowCode = 4008

    func shouldUpgrade(_ request: Request) async -> RouterShouldUpgrade {
        guard let token = EdgeRoutes.bearer(request) ?? EdgeRoutes.subprotocolToken(request),
              (try? await routes.core.authenticate(token)) != nil else {
            return .dontUpgrade
        }
        var headers = HTTPFields()
        if let offered = request.headers[.secWebSocketProtocol],
           offered.split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == EdgeRoutes.subprotocol }) {
            headers[.secWebSocketProtocol] = EdgeRoutes.subprotocol
        }
        return .upgrade(headers)
    }

    func run(inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter, request: Request) async throws {
        let core = routes.core, hub = routes.hub, heartbeat = routes.config.heartbeat
        guard let token = EdgeRoutes.bearer(request) ?? EdgeRoutes.subprotocolToken(request),
              let user = try? await core.authenticate(token) else {
            try await outbound.close(.init(codeNumber: Self.revokedCode), reason: "no session")
            return
        }
        let query = request.uri.queryParameters
        var resume: (epoch: UInt64, sequence: UInt64)?
        if let epoch = query.get("epoch").flatMap({ UInt64($0) }), let after = query.get("after").flatMap({ UInt64($0) }) {
            resume = (epoch, after)
        }
        // This connection's identity in the core's subscriptions: unique per connection.
        let peer = PeerIdentity(routingID: Array("edge-ws-\(UUID().uuidString)".utf8), hasDelimiter: false)
        core.subscribe(peer, user: user)
        let (id, epoch, start, frames) = hub.connect(user: user, resume: resume)
        defer {
            hub.disconnect(user: user, id: id)
            // Renewed, not dropped: the subscription outlives the hub's resume window, so events
            // sent while the client reconnects are logged for it.
            core.subscribe(peer, user: user)
        }
        // The hello's sequence: the number of the last event before the frames that follow it.
        let sequence: UInt64
        var first: [String] = []
        switch start {
        case .live(let s): sequence = s
        case .replay(let missed, _): sequence = resume?.sequence ?? 0; first = missed
        case .reset(let s):
            sequence = s
            first = [JSONValue.object([("type", .string("reset")), ("epoch", .string(String(epoch))), ("sequence", .number(Double(s))),
                                       ("reason", .string("events may have been missed: fetch the state again"))]).rendered()]
        }
        let hello = JSONValue.object([
            ("type", .string("hello")), ("epoch", .string(String(epoch))), ("sequence", .number(Double(sequence))),
            ("userId", .string(String(user))), ("heartbeatMs", .number(Double(heartbeat.wholeMilliseconds))),
        ])
        try await outbound.write(.text(hello.rendered()))
        for frame in first { try await outbound.write(.text(frame)) }

        enum Ending: Sendable { case closedByClient, tooSlow, revoked }
        let ending = await withTaskGroup(of: Ending?.self) { group -> Ending in
            group.addTask {
                for await frame in frames {
                    do { try await outbound.write(.text(frame)) } catch { return .closedByClient }
                }
                // The stream ends when the hub dropped this connection for a full queue, or on disconnect.
                return Task.isCancelled ? nil : .tooSlow
            }
            group.addTask {
                while (try? await Task.sleep(for: heartbeat)) != nil {
                    guard (try? await core.authenticate(token)) != nil else { return .revoked }
                    core.subscribe(peer, user: user)
                    let beat = JSONValue.object([("type", .string("heartbeat")), ("sequence", .number(Double(hub.lastSequence(user: user))))])
                    do { try await outbound.write(.text(beat.rendered())) } catch { return .closedByClient }
                }
                return nil
            }
            group.addTask {
                // Clients send nothing the edge needs; reading drains pings' replies and sees the close.
                do {
                    for try await _ in inbound.messages(maxSize: 1 << 16) {}
                } catch {}
                return .closedByClient
            }
            var ending: Ending = .closedByClient
            for await result in group {
                if let result { ending = result; break }
            }
            group.cancelAll()
            return ending
        }
        switch ending {
        case .closedByClient: break
        case .tooSlow: try? await outbound.close(.init(codeNumber: Self.tooSlowCode), reason: "too slow: resume with epoch and after")
        case .revoked: try? await outbound.close(.init(codeNumber: Self.revokedCode), reason: "session ended")
        }
    }
}
