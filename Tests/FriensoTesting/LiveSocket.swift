import Foundation
public import FriensoProto
import HTTPTypes
import HummingbirdWSClient
import Logging
import NIOWebSocket
import Synchronization

/// A WebSocket client of the edge's `/v1/events` for tests: every text frame parsed as JSON, in
/// order, and how the socket ended.
public final class LiveSocket: Sendable {
    private struct State {
        var frames: [JSONValue] = []
        var ended = false
    }

    private final class Box: Sendable {
        let state = Mutex(State())
    }

    private let box = Box()
    private let stop: AsyncStream<Void>.Continuation
    private let run: Task<Int?, any Error>

    /// Connects. - Parameter headers: e.g. `Authorization`, `Sec-WebSocket-Protocol`.
    public init(_ url: String, headers: [(String, String)] = []) {
        let (stopping, stop) = AsyncStream.makeStream(of: Void.self)
        var configuration = WebSocketClientConfiguration()
        configuration.maxFrameSize = 1 << 20
        for (name, value) in headers {
            if let field = HTTPField.Name(name) { configuration.additionalHeaders[field] = value }
        }
        self.stop = stop
        let box = box
        run = Task {
            defer { box.state.withLock { $0.ended = true } }
            let closed = try await WebSocketClient.connect(url: url, configuration: configuration, logger: Logger(label: "live-socket")) { inbound, outbound, _ in
                let closer = Task {
                    for await _ in stopping { break }
                    try? await outbound.close(.normalClosure, reason: nil)
                }
                defer { closer.cancel() }
                for try await message in inbound.messages(maxSize: 1 << 20) {
                    if case .text(let text) = message, let json = try? JSONParser.parse(text) {
                        box.state.withLock { $0.frames.append(json) }
                    }
                }
            }
            return closed.map { Int(UInt16(webSocketErrorCode: $0.closeCode)) }
        }
    }

    /// The next frame, or nil when the socket ended first or `within` passed (a bounded wait).
    public func next(within: Duration = .seconds(10)) async -> JSONValue? {
        let until = ContinuousClock.now.advanced(by: within)
        while true {
            let (frame, ended) = box.state.withLock { state -> (JSONValue?, Bool) in
                state.frames.isEmpty ? (nil, state.ended) : (state.frames.removeFirst(), false)
            }
            if let frame { return frame }
            if ended || ContinuousClock.now >= until { return nil }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// The next frame whose `type` is `type` (others skipped), within `within`.
    public func next(_ type: String, within: Duration = .seconds(10)) async -> JSONValue? {
        let until = ContinuousClock.now.advanced(by: within)
        while ContinuousClock.now < until {
            guard let frame = await next(within: ContinuousClock.now.duration(to: until)) else { return nil }
            if frame["type"] == .string(type) { return frame }
        }
        return nil
    }

    /// Closes from this side. - Returns: the close code the socket ended with (nil: none).
    @discardableResult
    public func close() async -> Int? {
        stop.yield()
        stop.finish()
        return try? await run.value
    }

    /// Waits for the socket to end (the server closed it). - Returns: the server's close code.
    /// - Throws: when the connection failed (an upgrade refused).
    public func ended() async throws -> Int? {
        try await run.value
    }
}
