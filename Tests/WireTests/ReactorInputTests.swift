import Dispatch
import FriensoProto
import FriensoTesting
import Testing
@testable import Wire

/// How a reactor learns that its sockets have input: libzmq announces a message on a socket's
/// descriptor once, so a socket read but maybe not drained must be asked about (`ZMQ_EVENTS`)
/// on the next turn (`ZMQSocket.mayHaveInput`; docs/benchmarks.md, items 27 and 142).
@Suite("reactor input", .timeLimit(.minutes(1)))
struct ReactorInputTests {
    /// A host reads at most 256 messages a turn, then lets its reactor's other work run. The
    /// rest are read on the next turns without another wake-up from libzmq (the one that said
    /// they came was taken by the first receive): a receive that took a message leaves its socket
    /// marked as one to ask about. Held up while 600 requests pile up, the host answers them all.
    /// When the reactor cleared that mark after every `readable`, the host read its first 256
    /// and answered nothing more (two runs of two).
    @Test func aHostLeftWithMessagesAtTheEndOfItsTurn_readsTheRestWithoutAnotherWakeUp() async throws {
        try await withHost(reactorName: "yield-test") { reactor, host in
            let raw = try RawPeer(.dealer, connect: try await host.boundEndpoint())
            try raw.send([Envelope(version: 1, kind: .request, requestId: 1, method: "test.Ping").serializedBytes()])
            #expect(try raw.receiveEnvelope()?.requestId == 1)
            let holding = OneShot<Void>()
            let release = DispatchSemaphore(value: 0)
            reactor.execute {
                holding.fulfil(())
                release.wait()
            }
            await holding.value
            let ids = Set<UInt64>(2...601)
            for id in ids.sorted() {
                try raw.send([Envelope(version: 1, kind: .request, requestId: id, method: "test.Ping").serializedBytes()])
            }
            release.signal()
            var answered = Set<UInt64>()
            while answered.count < ids.count, let reply = try raw.receiveEnvelope() {
                #expect(reply.status == .ok)
                answered.insert(reply.requestId)
            }
            #expect(answered.isSubset(of: ids))
            #expect(answered.count == ids.count, "\(ids.count - answered.count) of \(ids.count) requests not answered within the receive timeout")
        }
    }

    /// A host answering `test.Ping` itself, on a new reactor.
    private func withHost(reactorName: String, _ body: @Sendable (Reactor, ServiceHost) async throws -> Void) async throws {
        let reactor = Reactor(name: reactorName)
        let logs = CapturedLogs()
        let host = ServiceHost(options: HostOptions(name: "test", endpoint: "tcp://127.0.0.1:*"), handler: MethodRouter(),
                               logger: logs.logger("host"), reactor: reactor)
        try await withRunningServices([host], logger: logs.logger("group")) { try await body(reactor, host) }
        reactor.stop()
    }
}
