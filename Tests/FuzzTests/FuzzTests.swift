import Accounts
import Alerts
import Social
import CLinuxShims
import CZeroMQ
import Foundation
@_spi(Testing) import FriensoProto
import FriensoTesting
import Geo
import Logging
import Media
import Places
import SocialReplica
import Testing
@testable import Wire

/// Seeded mutation fuzzing (libFuzzer needs a toolchain built with it; this loop runs anywhere and
/// in every CI run): the envelope codec, every service's request decoding, a live host fed
/// mutated frames, and the handlers of accounts, geo, alerts and media fed mutated requests.
/// Properties: nothing crashes or hangs (time limit), memory stays bounded, a decoded value
/// re-encodes to bytes that decode to the same value, and a handler never answers INTERNAL to
/// bad input (that would be an unexpected error path: bad input gets a stable error code).
@Suite("fuzz", .serialized, .timeLimit(.minutes(3)))
struct FuzzTests {
    /// Valid encodings of `type` to start from.
    static func seeds<M: ProtoMessage>(_ type: M.Type, count: Int = 8) -> [[UInt8]] {
        (0..<UInt64(count)).map { M.sample(seed: $0, depth: 0).serializedBytes() } + [[]]
    }

    /// Decodes; when it decodes, its encoding must decode again and encode to the same bytes (a
    /// fixed point: compared as bytes, since a decoded NaN is not equal to itself).
    static func decodeIsStable<M: ProtoMessage>(_ type: M.Type, _ bytes: [UInt8]) -> (decoded: Bool, stable: Bool) {
        guard let value = try? M(serializedBytes: bytes) else { return (false, true) }
        let once = value.serializedBytes()
        guard let again = try? M(serializedBytes: once) else { return (true, false) }
        return (true, again.serializedBytes() == once)
    }

    static func heap() -> Int { Int(frienso_heap_in_use()) }

    @Test func envelopeCodec() {
        var mutator = Mutator(seed: fuzzSeed)
        let corpus = Self.seeds(CommonV1.Envelope.self, count: 32)
        var decoded = 0
        for i in 0..<fuzzIterations {
            let input = mutator.mutate(corpus[i % corpus.count], other: corpus[(i * 7 + 3) % corpus.count])
            let result = Self.decodeIsStable(CommonV1.Envelope.self, input)
            if result.decoded { decoded += 1 }
            #expect(result.stable, "seed \(fuzzSeed) input \(i): \(input)")
        }
        #expect(decoded > 0 && decoded < fuzzIterations, "the mutations both keep and break the encoding (\(decoded) decoded)")
    }

    @Test(arguments: ["accounts", "social", "geo", "alerts", "media", "common"])
    func requestDecoding(_ service: String) {
        let types = ProtoIndex.messageTypes.filter { $0.protoName.hasPrefix("frienso.\(service).v1.") && $0.protoName.hasSuffix("Request") }
        #expect(!types.isEmpty)
        var mutator = Mutator(seed: fuzzSeed ^ UInt64(service.utf8.count))
        var decoded = 0
        for i in 0..<fuzzIterations {
            let type = types[i % types.count]
            let (ok, stable) = Self.fuzzOne(type, &mutator, i)
            if ok { decoded += 1 }
            #expect(stable, "\(type.protoName), seed \(fuzzSeed) input \(i)")
        }
        #expect(decoded > 0)
    }

    /// Memory stays bounded: the heap is process-wide and other suites run beside this one, so the
    /// measuring runs in a process of its own (this test binary again, this test alone), decoding
    /// 20,000 mutated inputs of every request type twice; the second pass may not grow the heap
    /// (a leak per input would show as a few MiB).
    @Test func codecMemory_staysBounded() async throws {
        if ProcessInfo.processInfo.environment["FRIENSO_FUZZ_MEMORY_CHILD"] == "1" {
            let types: [any ProtoMessage.Type] = [CommonV1.Envelope.self] + ProtoIndex.messageTypes.filter { $0.protoName.hasSuffix("Request") }
            func pass() {
                var mutator = Mutator(seed: fuzzSeed)
                for i in 0..<fuzzIterations {
                    let type = types[i % types.count]
                    _ = Self.fuzzOne(type, &mutator, i)
                }
            }
            pass()
            let before = Self.heap()
            pass()
            let growth = Self.heap() - before
            #expect(growth < 1 << 20, "the second pass of \(fuzzIterations) inputs grew the heap by \(growth) bytes")
            return
        }
        let binary = CommandLine.arguments[0]
        let child = try await ProcessHarness.run(binary, ["--testing-library", "swift-testing", "--filter", "codecMemory_staysBounded"],
                                                 environment: ["FRIENSO_FUZZ_MEMORY_CHILD": "1"])
        #expect(child.status == 0 && child.output.contains("codecMemory_staysBounded() passed"), "\(child.output.suffix(3_000))")
    }

    static func fuzzOne<M: ProtoMessage>(_ type: M.Type, _ mutator: inout Mutator, _ i: Int) -> (Bool, Bool) {
        let corpus = seeds(type)
        let input = mutator.mutate(corpus[i % corpus.count], other: corpus[(i + 1) % corpus.count])
        return decodeIsStable(type, input)
    }

    /// Raw frames, most of them mutated envelopes, some not envelopes at all, some multi-frame,
    /// some batch frames of mutated envelopes (a seventh; half of those with their framing mutated
    /// too), at a running host: it answers what it can, drops the rest, and still answers a Ping
    /// afterwards.
    @Test func liveHost_survivesMutatedFrames() async throws {
        let logs = CapturedLogs()
        let host = ServiceHost(options: HostOptions(name: "fuzz", endpoint: "tcp://127.0.0.1:*"), handler: DecodingHandler(), logger: logs.logger("host"))
        try await withRunningServices([host], logger: logs.logger("group")) {
            let endpoint = try await host.boundEndpoint()
            let frames = fuzzIterations / 4
            let answered = await ProcessHarness.offPool { () -> Result<Int, any Error> in
                Result { try Self.blast(endpoint: endpoint, frames: frames) }
            }
            let replies = try answered.get()
            #expect(replies > 0, "some mutated requests still decode and are answered")
        }
    }

    /// Sends the frames from a raw DEALER (on a thread of its own), then a Ping; returns how many
    /// replies came back before the Ping's.
    static func blast(endpoint: String, frames: Int) throws -> Int {
        let socket = try ZMQSocket(.shared, .dealer)
        try socket.set(ZMQ_RCVTIMEO, 5_000)
        try socket.set(ZMQ_SNDHWM, 100_000)
        try socket.connect(endpoint)
        var mutator = Mutator(seed: fuzzSeed ^ 0xF8A)
        let methods = ["fuzz.Ping", "accounts.Login", "media.GetPhoto", "geo.UpdateLocation", "nope", ""]
        let corpus = (0..<UInt64(16)).map { seed -> [UInt8] in
            var e = CommonV1.Envelope.sample(seed: seed, depth: 0)
            e.version = WireProtocol.version
            e.kind = .request
            e.method = methods[Int(seed) % methods.count]
            e.deadlineMs = 2_000
            return e.serializedBytes()
        }
        /// A batch frame (`WireBatch`: the marker, then each member's length and bytes).
        func batch(_ members: [[UInt8]]) -> [UInt8] {
            var bytes: [UInt8] = [0]
            for member in members {
                var length = UInt64(member.count)
                while length >= 0x80 {
                    bytes.append(UInt8(truncatingIfNeeded: length) | 0x80)
                    length >>= 7
                }
                bytes.append(UInt8(length))
                bytes += member
            }
            return bytes
        }
        var replies = 0
        for i in 0..<frames {
            var input = mutator.mutate(corpus[i % corpus.count], other: corpus[(i + 5) % corpus.count])
            if i % 7 == 3 {
                // Batches of mutated envelopes; every other one with its own framing mutated too.
                input = batch((0..<(2 + i % 3)).map { k in mutator.mutate(corpus[(i + k) % corpus.count], other: corpus[(i + k + 3) % corpus.count]) })
                if i % 14 == 3 { input = [0] + mutator.mutate(Array(input.dropFirst()), other: corpus[i % corpus.count]) }
            }
            let message: [[UInt8]] = i % 97 == 0 ? [input, input] : (i % 89 == 0 ? [[], input] : [input])
            _ = try socket.send(message, dontWait: false)
            while let reply = try socket.receive(dontWait: true) { if !reply.frames.isEmpty { replies += 1 } }
        }
        let ping = Envelope(version: WireProtocol.version, kind: .request, requestId: 0xC0FFEE, method: "fuzz.Ping", deadlineMs: 5_000)
        _ = try socket.send([ping.serializedBytes()], dontWait: false)
        while true {
            guard let message = try socket.receive(dontWait: false) else { throw TimedOut(description: "no answer to the Ping after the fuzz frames") }
            guard let last = message.frames.last, let envelope = try? Envelope(serializedBytes: last) else { continue }
            if envelope.requestId == 0xC0FFEE {
                #expect(envelope.status == .ok)
                return replies
            }
            replies += 1
        }
    }

    /// Mutated requests for every method of each service, straight into its router (no sockets
    /// in front; social's calls to accounts go to a real accounts host): each gets an answer, and
    /// never INTERNAL.
    @Test(arguments: ["accounts", "social", "geo", "alerts", "media"])
    func handlers_answerBadInput_withStableCodes(_ service: String) async throws {
        let temp = try TemporaryDirectory("frienso-fuzz-\(service)")
        defer { temp.remove() }
        let logs = CapturedLogs()
        var accountsConfig = AccountsConfig()
        accountsConfig.hasher = PasswordHasher(opsLimit: 1, memLimit: 8_192, lanes: 1)
        switch service {
        case "accounts":
            try await Self.fuzz(try AccountsService(directory: temp.path, config: accountsConfig).router(), service, logs)
        case "social":
            let accounts = try AccountsService(directory: "\(temp.path)/accounts", config: accountsConfig)
                .makeHost(options: HostOptions(name: "accounts", endpoint: "tcp://127.0.0.1:*"), logger: logs.logger("accounts"))
            let publisher = Publisher(name: "social", endpoint: "tcp://127.0.0.1:*", logger: logs.logger("pub"))
            try await withRunningServices([accounts, publisher], logger: logs.logger("group")) {
                let client = WireClient(endpoint: try await accounts.boundEndpoint(), options: .patient, logger: logs.logger("client"))
                let social = try SocialService(directory: temp.path, accounts: client, publisher: publisher)
                try await Self.fuzz(social.router(), service, logs)
                await client.close()
            }
        case "geo":
            var config = GeoConfig()
            config.operatorKey = "fuzz-operator"
            try await Self.fuzz(try GeoService(directory: temp.path, graph: StaticGraph(), publisher: nil, config: config, logger: logs.logger("geo")).router(),
                                service, logs)
        case "alerts":
            var config = AlertsConfig()
            config.operatorKey = "fuzz-operator"
            try await Self.fuzz(try AlertsService(directory: temp.path, peers: QuietPeers(), events: nil, config: config, logger: logs.logger("alerts")).router(),
                                service, logs)
        default:
            try await Self.fuzz(try MediaService(directory: temp.path, peers: OpenMediaPeers(), logger: logs.logger("media")).router(), service, logs)
        }
    }

    static func fuzz(_ router: MethodRouter, _ service: String, _ logs: CapturedLogs) async throws {
        let types = DecodingHandler.types
        let methods = router.methods
        #expect(!methods.isEmpty)
        var mutator = Mutator(seed: fuzzSeed ^ 0xAB)
        var statuses: [StatusCode: Int] = [:]
        let inputs = fuzzIterations / 4
        for i in 0..<inputs {
            let method = methods[i % methods.count]
            let rpc = method.split(separator: ".").last.map(String.init) ?? ""
            guard let type = types["frienso.\(service).v1.\(rpc)Request"] else { continue }
            let payload = Self.mutatedSample(type, &mutator, i)
            let envelope = Envelope(version: WireProtocol.version, kind: .request, requestId: UInt64(i), method: method,
                                    callerUserId: UInt64(mutator.int(4)), deadlineMs: 2_000, payload: payload)
            let request = IncomingRequest(envelope: envelope, peer: PeerIdentity(routingID: [1], hasDelimiter: false), peerAddress: "127.0.0.1",
                                          deadline: .now.advanced(by: .seconds(2)), key: UInt64(i))
            let reply = await router.handle(request, logger: logs.logger("fuzz"))
            statuses[reply.status, default: 0] += 1
            #expect(reply.status != .internal, "\(method) answered INTERNAL (\(reply.statusMessage)) to input \(i), seed \(fuzzSeed)\n\(logs.dump().suffix(2_000))")
        }
        #expect((statuses[.invalidArgument] ?? 0) > 0, "\(statuses)")
    }

    /// The crash the handler fuzzing found: an id past Int64.max trapped where accounts bound it
    /// into SQL. Every router now refuses such a request before any handler runs.
    @Test func idsPastInt64Max_areInvalidArgument_notACrash() async throws {
        let temp = try TemporaryDirectory("frienso-fuzz-ids")
        defer { temp.remove() }
        let accounts = try AccountsService(directory: "\(temp.path)/accounts").router()
        let media = try MediaService(directory: "\(temp.path)/media", peers: OpenMediaPeers(), logger: CapturedLogs().logger("media")).router()
        let cases: [(MethodRouter, String, [UInt8])] = [
            (accounts, "accounts.GetProfile", AccountsV1.GetProfileRequest(userId: UInt64(Int64.max) + 1).serializedBytes()),
            (media, "media.ListPhotos", MediaV1.ListPhotosRequest(placeId: .max).serializedBytes()),
            (media, "media.ListPhotos", MediaV1.ListPhotosRequest(profileOf: .max).serializedBytes()),
        ]
        for (router, method, payload) in cases {
            let envelope = Envelope(version: WireProtocol.version, kind: .request, requestId: 1, method: method, callerUserId: 1, payload: payload)
            let reply = await router.handle(IncomingRequest(envelope: envelope, peer: PeerIdentity(routingID: [1], hasDelimiter: false),
                                                            peerAddress: "", deadline: .now.advanced(by: .seconds(2)), key: 1), logger: CapturedLogs().logger("t"))
            #expect(reply.status == .invalidArgument && reply.statusMessage.contains("out of range"), "\(method): \(reply.status) \(reply.statusMessage)")
        }
        // The largest valid id still reaches the handler (which finds nobody).
        let envelope = Envelope(version: WireProtocol.version, kind: .request, requestId: 2, method: "accounts.GetProfile", callerUserId: 1,
                                payload: AccountsV1.GetProfileRequest(userId: UInt64(Int64.max)).serializedBytes())
        let reply = await accounts.handle(IncomingRequest(envelope: envelope, peer: PeerIdentity(routingID: [1], hasDelimiter: false),
                                                          peerAddress: "", deadline: .now.advanced(by: .seconds(2)), key: 2), logger: CapturedLogs().logger("t"))
        #expect(reply.status == .notFound, "\(reply.status) \(reply.statusMessage)")
    }

    static func mutatedSample<M: ProtoMessage>(_ type: M.Type, _ mutator: inout Mutator, _ i: Int) -> [UInt8] {
        let corpus = seeds(type, count: 4)
        // One input in four is a valid sample as is: it reaches the handler's own validation.
        if i % 4 == 0 { return corpus[(i / 4) % corpus.count] }
        return mutator.mutate(corpus[i % corpus.count], other: corpus[(i + 1) % corpus.count])
    }
}

/// Decodes the payload as the request its method names (any service), like a router would.
struct DecodingHandler: RequestHandler {
    static let types = Dictionary(uniqueKeysWithValues: ProtoIndex.messageTypes.map { ($0.protoName, $0) })

    func handle(_ request: IncomingRequest, logger: Logger) async -> Envelope {
        let parts = request.envelope.method.split(separator: ".")
        guard parts.count == 2, let type = Self.types["frienso.\(parts[0]).v1.\(parts[1])Request"] else {
            return request.envelope.reply(error: .invalidArgument("unknown method"))
        }
        return Self.decode(type, request.envelope)
    }

    static func decode<M: ProtoMessage>(_ type: M.Type, _ envelope: Envelope) -> Envelope {
        (try? M(serializedBytes: envelope.payload)) == nil ? envelope.reply(error: .invalidArgument("bad payload")) : envelope.reply(payload: [])
    }
}

/// Alerts' peers answering as if everyone's circle were empty and nobody had a location.
struct QuietPeers: AlertsPeers {
    func circleFromSocial(of owner: UInt64) async throws -> [CircleContact] { [] }
    func circleFromReplica(of owner: UInt64) -> [CircleContact] { [] }
    func circles(afterOwner: UInt64, owners: Int) async throws -> (circles: [(owner: UInt64, contacts: [CircleContact])], next: UInt64) { ([], 0) }
    func circleClock(of owner: UInt64) -> CircleClock? { nil }
    func places(afterID: UInt64, limit: Int) async throws -> (places: [PlaceRecord], next: UInt64, within: Double) { ([], 0, 150) }
    func circleRequests(for member: UInt64) async throws -> [(owner: UInt64, atMs: Int64)] { [] }
    func respondToCircleRequest(member: UInt64, owner: UInt64, accept: Bool) async throws { throw RPCError.notFound("no such request") }
    func notices(after id: UInt64, limit: Int) async throws -> [SocialV1.Notice] { [] }
    func placeEvents(after id: UInt64, limit: Int) async throws -> [(event: GeoV1.PlaceAlertEvent, viewer: UInt64)] { [] }
    func latestLocation(of user: UInt64, phoneFix: AlertsV1.AlertLocation?) async throws -> AlertsV1.AlertLocation { phoneFix ?? AlertsV1.AlertLocation() }
    func people(_ ids: Set<UInt64>) async throws -> [UInt64: AlertsV1.Person] { [:] }
    func phones(_ ids: Set<UInt64>) async throws -> [UInt64: String] { [:] }
    func verifyPassword(user: UInt64, password: String) async throws -> Bool { false }
}

struct OpenMediaPeers: MediaPeers {
    func areFriends(_ a: UInt64, _ b: UInt64) -> Bool { a % 2 == b % 2 }
    func blocked(_ a: UInt64, _ b: UInt64) -> Bool { false }
    func checkInAccess(viewer: UInt64, owner: UInt64) async throws -> (visible: Bool, mediaID: String) { (true, "") }
    func placeExists(_ id: UInt64) async throws -> Bool { id < 10 }
}
