import FriensoProto
import FriensoTesting
@testable import Geo
import Synchronization
import Testing
import Wire

extension GeoTestGroup {
    /// Check-ins through a real host with a durable reply cache start on its reactor thread, keyed
    /// ones included, and are answered from their commit's thread
    /// (`MethodRouter.startOnReactor(_:keyed:_:)`, issue 16, item 91): the reply cache's steps,
    /// the claim committed with the row, the reply kept for a retry, before and after a restart
    /// (written in the same transaction as the row and claim: item 94).
    @Suite("geo: check-ins started on the host's reactor", .timeLimit(.minutes(2)))
    struct CheckInsOnReactorTests {
        /// geo behind a host as its executable runs it (`FriensoService.host`: replies kept in its database).
        /// - Parameter replies: the durable reply store (default: the service's own).
        func withHost(_ geo: GeoHarness, replies: (any ReplyStore)? = nil,
                      _ body: @Sendable (ServiceHost, WireClient) async throws -> Void) async throws {
            let logs = CapturedLogs()
            let host = ServiceHost(options: HostOptions(name: "geo", endpoint: "tcp://127.0.0.1:*"), handler: geo.service.router(),
                                   logger: logs.logger("geo-host"), replyCache: ReplyCache(store: replies ?? geo.service.replyStore))
            do {
                try await withRunningServices([host], logger: logs.logger("group")) {
                    let client = WireClient(endpoint: try await host.boundEndpoint(), options: .patient, logger: logs.logger("client"))
                    do {
                        try await body(host, client)
                    } catch {
                        await client.close()
                        throw error
                    }
                    await client.close()
                }
            } catch {
                print("check-ins on the reactor failed; host logs:\n\(logs.dump().suffix(6000))")
                throw error
            }
        }

        static func checkIn(_ client: WireClient, _ user: UInt64, _ place: String, key: String = "",
                            media: String = "") async -> Result<GeoV1.CheckInResponse, RPCError> {
            do {
                return .success(try await client.call(API.checkIn, GeoV1.CheckInRequest(placeName: place, mediaId: media),
                                                      options: CallOptions(idempotencyKey: key, callerUserID: user)))
            } catch {
                return .failure(error)
            }
        }

        @Test(arguments: Engine.allCases) func keyedCheckIns_startOnTheReactor_andARetryGetsTheKeptReply(engine: Engine) async throws {
            try await withGeo(engine: engine) { geo async throws in
                for user in 1...30 as ClosedRange<UInt64> { try await geo.locate(user, 40 + Double(user) / 1_000, -73) }
                try await withHost(geo) { host, client async throws in
                    // Many at once, each keyed: each answered once its row and claim are durable.
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for user in 1...30 as ClosedRange<UInt64> {
                            group.addTask {
                                let reply = await Self.checkIn(client, user, "Place \(user)", key: "k-\(user)")
                                #expect((try? reply.get())?.checkIn?.placeName == "Place \(user)", "user \(user): \(reply)")
                            }
                        }
                        try await group.waitForAll()
                    }
                    #expect(host.counters.onReactor.load(ordering: .relaxed) == 30, "each started on the reactor")
                    #expect(try await geo.number("SELECT count(*) FROM check_ins") == 30)
                    #expect(try await geo.number("SELECT count(*) FROM idempotent_replies") == 30, "each with its claim")
                    // Each reply was written with its row and claim (item 94): durable when it was
                    // answered, with no save after the commit for a crash to lose.
                    #expect(try await geo.number("SELECT count(*) FROM idempotent_replies WHERE length(reply) > 0") == 30)

                    // A retry is the kept reply: the check-in as it was made, not made again.
                    let first = try await Self.checkIn(client, 1, "Place 1", key: "k-1").get()
                    geo.clock.advance(60_000)
                    let retry = try await Self.checkIn(client, 1, "Place 1", key: "k-1").get()
                    #expect(retry == first && retry.checkIn?.createdAtMs == geo.clock.now - 60_000)
                    #expect(try await geo.number("SELECT created_ms FROM check_ins WHERE user_id = 1") == Double(geo.clock.now - 60_000))
                    // The key used for another request is refused; a new key is a new check-in.
                    let reused = await Self.checkIn(client, 1, "Somewhere else", key: "k-1")
                    #expect(reused.failure?.code == .invalidArgument)
                    let again = try await Self.checkIn(client, 1, "Place 1", key: "k-1b").get()
                    #expect(again.replaced && again.checkIn?.createdAtMs == geo.clock.now)

                    // Refusals keep their stable codes, keyed or not.
                    #expect(await Self.checkIn(client, 1, "  ", key: "k-blank").failure?.code == .invalidArgument)
                    #expect(await Self.checkIn(client, 0, "Anywhere", key: "k-anon").failure?.code == .unauthenticated)
                    #expect(await Self.checkIn(client, 99, "No fix", key: "k-99").failure?.code == .failedPrecondition)
                    #expect(await Self.checkIn(client, 2, "Bad photo", key: "k-bad", media: "bad-1").failure?.code == .notFound)

                    // A photo asks media: it goes on on a task, with the request's claim.
                    let photo = try await Self.checkIn(client, 2, "With a photo", key: "k-photo", media: "p-2").get()
                    #expect(photo.checkIn?.mediaId == "p-2" && geo.photos.attached.withLock { $0.map(\.mediaID) } == ["p-2"])
                    #expect(try await Self.checkIn(client, 2, "With a photo", key: "k-photo", media: "p-2").get() == photo)
                    #expect(geo.photos.attached.withLock { $0.count } == 1, "the retry attached nothing again")
                }
            }
        }

        /// The process dies once the check-in is answered, before any reply's save after a commit
        /// could land (the store below loses them all): the reply was written with the row and the
        /// claim (item 94), so the retry after the restart gets the check-in back. Saved after the
        /// commit instead (`FRIENSO_KEPT_REPLIES=after`), the claim alone could only answer
        /// ALREADY_EXISTS.
        @Test(arguments: Engine.allCases) func aCrashRightAfterTheAnswer_losesNoReply(engine: Engine) async throws {
            let storage = try await TestStorage.fresh(engine, service: "geo")
            let clock = TestClock()
            let first = try await withGeo(storage: storage, clock: clock) { geo async throws in
                try await geo.locate(1, 40.7, -73.9)
                let losing = LosingSaves(geo.service.replyStore)
                let reply = Mutex<GeoV1.CheckInResponse?>(nil)
                try await withHost(geo, replies: losing) { _, client async throws in
                    let made = try await Self.checkIn(client, 1, "Before the crash", key: "k-crash").get()
                    reply.withLock { $0 = made }
                }
                #expect(losing.saves == 0, "nothing was left to save after the commit")
                return try #require(reply.withLock { $0 })
            }
            clock.advance(60_000)
            try await withGeo(storage: storage, clock: clock) { geo async throws in
                try await withHost(geo) { _, client async throws in
                    let retry = await Self.checkIn(client, 1, "Before the crash", key: "k-crash")
                    #expect((try? retry.get()) == first, "the check-in as it was made: \(retry)")
                    #expect(try await geo.number("SELECT count(*) FROM check_ins") == 1)
                    #expect(try await geo.number("SELECT created_ms FROM check_ins WHERE user_id = 1") == Double(clock.now - 60_000))
                }
            }
            await storage.remove()
        }

        /// After a restart the reply cache's memory is empty: the retry starts on the reactor, its
        /// write meets the claim its first run committed, and the host answers from the store.
        @Test(arguments: Engine.allCases) func aRetryAfterARestart_isAnsweredFromTheStore(engine: Engine) async throws {
            let storage = try await TestStorage.fresh(engine, service: "geo")
            let clock = TestClock()
            let first = try await withGeo(storage: storage, clock: clock) { geo async throws in
                try await geo.locate(1, 40.7, -73.9)
                let reply = Mutex<GeoV1.CheckInResponse?>(nil)
                try await withHost(geo) { _, client async throws in
                    let made = try await Self.checkIn(client, 1, "Before the restart", key: "k-restart").get()
                    reply.withLock { $0 = made }
                }
                return try #require(reply.withLock { $0 })
            }
            clock.advance(60_000)
            try await withGeo(storage: storage, clock: clock) { geo async throws in
                try await withHost(geo) { host, client async throws in
                    let retry = try await Self.checkIn(client, 1, "Before the restart", key: "k-restart").get()
                    #expect(retry == first, "the kept reply, not a second check-in")
                    #expect(host.counters.onReactor.load(ordering: .relaxed) == 1)
                    #expect(try await geo.number("SELECT created_ms FROM check_ins WHERE user_id = 1") == Double(clock.now - 60_000))
                    let reused = await Self.checkIn(client, 1, "Elsewhere", key: "k-restart")
                    #expect(reused.failure?.code == .invalidArgument, "the key stays bound to its request")
                    #expect(try await geo.number("SELECT created_ms FROM check_ins WHERE user_id = 1") == Double(clock.now - 60_000))
                }
            }
            await storage.remove()
        }
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
