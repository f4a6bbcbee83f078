import Foundation
import FriensoClient
import FriensoProto
import FriensoTesting
import GRDB
import Synchronization
import Testing
import Wire

/// A user the load drives: their own client, logged in.
struct Actor: Sendable {
    let name: String
    let id: UInt64
    let client: FriensoClient
}

/// Registers `name` through the gateway and logs in.
func makeActor(_ stack: LaunchedStack, _ name: String, number: Int) async throws -> Actor {
    let client = stack.client(deadline: .seconds(3))
    _ = try await client.call(AccountsV1.AccountsService.register, AccountsV1.RegisterRequest(
        username: name, email: "\(name)@faults.example", phone: "+1562555\(String(format: "%04d", 1_000 + number))",
        password: "password \(name) 1", firstName: name.capitalized, lastName: "Load"), mutation: true)
    let login = try await client.login(name, password: "password \(name) 1")
    return Actor(name: name, id: login.account?.profile?.userId ?? 0, client: client)
}

/// `a` asks `b`, `b` accepts: friends.
func befriend(_ a: Actor, _ b: Actor) async throws {
    let sent = try await a.client.call(SocialV1.SocialService.sendFriendRequest, SocialV1.SendFriendRequestRequest(userId: b.id), mutation: true)
    _ = try await b.client.call(SocialV1.SocialService.respondToFriendRequest, SocialV1.RespondToFriendRequestRequest(
        requestId: sent.request?.requestId ?? 0, action: .accept), mutation: true)
}

/// `owner` asks `member` into the core circle, `member` accepts.
func addToCircle(_ owner: Actor, _ member: Actor) async throws {
    _ = try await owner.client.call(SocialV1.SocialService.addToCircle, SocialV1.AddToCircleRequest(userId: member.id), mutation: true)
    _ = try await member.client.call(SocialV1.SocialService.respondToCircleRequest, SocialV1.RespondToCircleRequestRequest(
        ownerUserId: owner.id, action: .accept), mutation: true)
}

/// Set once, read by many tasks.
final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .relaxed) }
    func set() { value.store(true, ordering: .relaxed) }
}

/// An acknowledged location update: whose, and its device time (unique per user).
struct AckedLocation: Sendable {
    var user: UInt64
    var deviceMs: Int64
}

/// An acknowledged helpNow.
struct AckedAlert: Sendable {
    var id: UInt64
    var message: String
}

/// What the load saw: acknowledged writes (to look for afterwards) and failures by kind.
final class Tally: Sendable {
    struct State: Sendable {
        var locations: [AckedLocation] = []
        var requestsSent: [UInt64] = []
        var requestsCancelled: [UInt64] = []
        var alerts: [AckedAlert] = []
        var transient: [String: Int] = [:]
        var unexpected: [String] = []
        /// The longest single call, answered or failed: reported, not asserted (the calls' own
        /// deadlines bound it; a hang would end the test at its time limit).
        var longestCall: Duration = .zero
    }
    let state = Mutex(State())

    func transient(_ what: String, _ error: RPCError) {
        state.withLock { $0.transient["\(what) \(error.code.name)", default: 0] += 1 }
    }

    func unexpected(_ what: String, _ error: any Error) {
        state.withLock { $0.unexpected.append("\(what): \(error)") }
    }

    /// Times one call.
    func timed<R>(_ call: () async throws(RPCError) -> R) async throws(RPCError) -> R {
        let start = ContinuousClock.now
        defer {
            let took = start.duration(to: .now)
            state.withLock { $0.longestCall = max($0.longestCall, took) }
        }
        return try await call()
    }

    /// How many writes of each kind were acknowledged so far.
    var progress: [Int] {
        state.withLock { [$0.locations.count, $0.requestsSent.count, $0.alerts.count] }
    }

    /// Whether every kind moved on by at least `step` since `mark`.
    func progressed(since mark: [Int], by step: Int = 3) -> Bool {
        let now = progress
        for i in mark.indices where now[i] < mark[i] + step { return false }
        return true
    }
}

/// While a service is down its callers see UNAVAILABLE (or DEADLINE_EXCEEDED): expected, retried.
func isTransient(_ error: RPCError) -> Bool { error.code == .unavailable || error.code == .deadlineExceeded }

/// Sends a mutation until it is acknowledged, always with the same idempotency key, so a resend
/// after a lost reply is answered from the service's reply cache and applied once. Transient
/// failures are counted; anything else is thrown as the failure it is.
func untilAcknowledged<R: Sendable>(_ what: String, _ tally: Tally,
                                    _ send: @Sendable (String) async throws(RPCError) -> R) async throws -> R {
    let key = UUID().uuidString
    var pause = Duration.milliseconds(20)
    let until = ContinuousClock.now.advanced(by: .seconds(90))
    while true {
        let error: RPCError
        do {
            return try await tally.timed { () async throws(RPCError) -> R in try await send(key) }
        } catch let failure {
            error = failure
        }
        guard isTransient(error), ContinuousClock.now < until else { throw error }
        tally.transient(what, error)
        try await Task.sleep(for: pause) // backoff between resends, as a client does
        pause = min(pause * 2, .milliseconds(500))
    }
}

@Suite("end to end: kill -9 of every service under load", .serialized, .timeLimit(.minutes(6)))
struct FaultToleranceEndToEndTests {
    @Test func kill9OfEachServiceInTurn_underLoad_losesNoAcknowledgedWrite_andDuplicatesNoAlert() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let stack = try await LaunchedStack(procs)
        defer { stack.shutdown() }

        try await stack.showingLogsOnFailure {
            // Two circles for helpNow (u0 → u1, u2; u3 → u4, u5), each member with a phone and a
            // device; four strangers for friend requests.
            var u: [Actor] = []
            for i in 0..<6 { u.append(try await makeActor(stack, "user\(i)", number: i)) }
            var strangers: [Actor] = []
            for i in 0..<4 { strangers.append(try await makeActor(stack, "stranger\(i)", number: 10 + i)) }
            for (owner, members) in [(0, [1, 2]), (3, [4, 5])] {
                for m in members {
                    try await befriend(u[owner], u[m])
                    try await addToCircle(u[owner], u[m])
                }
            }
            for m in [1, 2, 4, 5] {
                _ = try await u[m].client.call(AlertsV1.AlertsService.registerDevice, AlertsV1.RegisterDeviceRequest(
                    token: "device-of-u\(m)-0001", platform: .android, appVersion: "e2e"), mutation: true)
            }

            let tally = Tally()
            let stop = Flag()
            let users = u
            var pairs: [(Actor, Actor)] = []
            for a in strangers { for b in strangers where b.id != a.id { pairs.append((a, b)) } }
            let requestPairs = pairs
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await Self.updateLocations(users, tally, stop) }
                group.addTask { await Self.sendAndCancelFriendRequests(requestPairs, tally, stop) }
                group.addTask { await Self.raiseAndResolveHelpNow([users[0], users[3]], tally, stop) }

                // Each service in turn (social twice), once every kind of write has moved on since the last kill.
                var mark = tally.progress
                for service in LaunchedStack.services + ["social"] {
                    let since = mark
                    try await eventually("load progressed before killing \(service)", timeout: .seconds(60)) { tally.progressed(since: since) }
                    try await stack.kill9AndAwaitRestart(service)
                    mark = tally.progress
                }
                let since = mark
                try await eventually("load progressed after the last restart", timeout: .seconds(60)) { tally.progressed(since: since) }
                stop.set()
                try await group.waitForAll()
            }

            let seen: Tally.State = tally.state.withLock { $0 }
            let failures = seen.transient.keys.sorted().map { "\($0) ×\(seen.transient[$0] ?? 0)" }.joined(separator: ", ")
            print("fault run: acknowledged \(seen.locations.count) locations, \(seen.requestsSent.count) friend requests, \(seen.alerts.count) helpNow; transient failures: \(failures); longest call \(seen.longestCall)")
            #expect(seen.unexpected.isEmpty, "\(seen.unexpected)\n\(stack.logs())")

            try await Self.checkLocations(seen.locations, in: stack)
            try await Self.checkLatestFixes(seen.locations, of: u)
            try await Self.checkFriendRequests(seen, from: strangers.map(\.id), in: stack)
            try await Self.checkAlerts(seen.alerts, raisedBy: [u[0].id, u[3].id], in: stack)
        }
    }

    /// A check-in answered, then geo killed at once (kill -9, before anything after the commit
    /// could run): its reply was written with its row and claim (issue 16, item 94), so the
    /// client's retry with the same key, after the launcher restarted geo, is the check-in as it
    /// was made. A reply saved after the commit (`FRIENSO_KEPT_REPLIES=after`) is lost in that
    /// window and the retry is told ALREADY_EXISTS.
    @Test func aCheckInAnsweredRightBeforeAKill9_isTheAnswerToItsRetry() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let stack = try await LaunchedStack(procs)
        defer { stack.shutdown() }
        try await stack.showingLogsOnFailure {
            let walker = try await makeActor(stack, "walker", number: 700)
            _ = try await walker.client.call(GeoV1.GeoService.updateLocation, GeoV1.UpdateLocationRequest(
                latitude: 33.78, longitude: -118.11, accuracyM: 5, deviceTimeMs: WallClock.milliseconds()), mutation: true)
            let request = GeoV1.CheckInRequest(placeName: "The library")
            let made = try await walker.client.call(GeoV1.GeoService.checkIn, request, idempotencyKey: "check-in-before-the-kill")
            try await stack.kill9AndAwaitRestart("geo")
            let retry = try await walker.client.call(GeoV1.GeoService.checkIn, request, idempotencyKey: "check-in-before-the-kill")
            #expect(retry == made, "the kept reply, not a second check-in or ALREADY_EXISTS")
            let listed = try await walker.client.call(GeoV1.GeoService.listCheckIns, GeoV1.ListCheckInsRequest()).checkIns
            #expect(listed.map(\.createdAtMs) == [made.checkIn?.createdAtMs ?? -1], "one check-in, made once: \(listed)")
        }
    }

    // MARK: The load

    /// One update at a time per user, each with its own device time; not resent (not keyed).
    static func updateLocations(_ users: [Actor], _ tally: Tally, _ stop: Flag) async throws {
        var deviceMs = Int64(Date().timeIntervalSince1970 * 1000)
        var n = 0
        while !stop.isSet && !Task.isCancelled {
            let actor = users[n % users.count]
            n += 1
            deviceMs = max(deviceMs + 1, Int64(Date().timeIntervalSince1970 * 1000))
            let request = GeoV1.UpdateLocationRequest(latitude: 33.78 + Double(n % 100) * 1e-5, longitude: -118.11,
                                                      accuracyM: 10, deviceTimeMs: deviceMs)
            do {
                _ = try await tally.timed { () async throws(RPCError) in try await actor.client.call(GeoV1.GeoService.updateLocation, request) }
                let acked = AckedLocation(user: actor.id, deviceMs: deviceMs)
                tally.state.withLock { $0.locations.append(acked) }
            } catch where isTransient(error) {
                tally.transient("location", error)
                try await Task.sleep(for: .milliseconds(20))
            } catch {
                tally.unexpected("location", error)
            }
        }
    }

    /// Requests between strangers, each sent then cancelled, resent until acknowledged.
    static func sendAndCancelFriendRequests(_ pairs: [(Actor, Actor)], _ tally: Tally, _ stop: Flag) async {
        var n = 0
        while !stop.isSet && !Task.isCancelled {
            let (from, to) = pairs[n % pairs.count]
            n += 1
            do {
                let sent = try await untilAcknowledged("friend request", tally) { key throws(RPCError) in
                    try await from.client.call(SocialV1.SocialService.sendFriendRequest,
                                               SocialV1.SendFriendRequestRequest(userId: to.id), idempotencyKey: key)
                }
                let id = sent.request?.requestId ?? 0
                tally.state.withLock { $0.requestsSent.append(id) }
                _ = try await untilAcknowledged("cancel", tally) { key throws(RPCError) in
                    try await from.client.call(SocialV1.SocialService.cancelFriendRequest,
                                               SocialV1.CancelFriendRequestRequest(requestId: id), idempotencyKey: key)
                }
                tally.state.withLock { $0.requestsCancelled.append(id) }
            } catch {
                tally.unexpected("friend request \(from.name) → \(to.name)", error)
            }
        }
    }

    /// helpNow raised and resolved in turn by the circle owners, each with its own message.
    static func raiseAndResolveHelpNow(_ initiators: [Actor], _ tally: Tally, _ stop: Flag) async {
        var n = 0
        while !stop.isSet && !Task.isCancelled {
            let initiator = initiators[n % initiators.count]
            n += 1
            let message = "load alert \(n) from \(initiator.name)"
            do {
                let raised = try await untilAcknowledged("helpNow", tally) { key throws(RPCError) in
                    try await initiator.client.call(AlertsV1.AlertsService.raiseHelpNow,
                                                    AlertsV1.RaiseHelpNowRequest(message: message), idempotencyKey: key)
                }
                let id = raised.alert?.alertId ?? 0
                if raised.alreadyActive { tally.unexpected("helpNow", RPCError(.internal, "alert \(id) was still active")) }
                tally.state.withLock { $0.alerts.append(AckedAlert(id: id, message: message)) }
                _ = try await untilAcknowledged("resolve", tally) { key throws(RPCError) in
                    try await initiator.client.call(AlertsV1.AlertsService.resolveHelpNow,
                                                    AlertsV1.ResolveHelpNowRequest(alertId: id), idempotencyKey: key)
                }
            } catch {
                tally.unexpected("helpNow \(message)", error)
            }
        }
    }

    // MARK: Afterwards, from the services' own databases

    /// Every acknowledged location is in geo's history.
    static func checkLocations(_ acked: [AckedLocation], in stack: LaunchedStack) async throws {
        let stored: Set<String> = try await stack.database("geo").read { db in
            var keys = Set<String>()
            for row in try Row.fetchAll(db, sql: "SELECT user_id, device_ms FROM history") {
                let user: Int64 = row[0], device: Int64 = row[1]
                keys.insert("\(user)/\(device)")
            }
            return keys
        }
        let lost = acked.filter { !stored.contains("\($0.user)/\($0.deviceMs)") }
        #expect(lost.isEmpty, "acknowledged location updates lost: \(lost.count) of \(acked.count)")
    }

    /// Geo, killed and restarted (its latest fixes rebuilt from history it had not folded yet),
    /// serves each user a latest fix at least as new as their newest acknowledged one (device
    /// times only grow; a later update may have applied without its reply).
    static func checkLatestFixes(_ acked: [AckedLocation], of users: [Actor]) async throws {
        for user in users {
            guard let newest = acked.filter({ $0.user == user.id }).map(\.deviceMs).max() else { continue }
            let you = try await user.client.call(GeoV1.GeoService.friendsLocations, GeoV1.FriendsLocationsRequest()).you
            #expect((you?.deviceTimeMs ?? 0) >= newest, "user \(user.id): latest fix \(you?.deviceTimeMs ?? 0), newest acknowledged \(newest)")
        }
    }

    /// Every acknowledged friend request is there, once, and cancelled when that was acknowledged.
    static func checkFriendRequests(_ seen: Tally.State, from senders: [UInt64], in stack: LaunchedStack) async throws {
        let list = senders.map { String($0) }.joined(separator: ",")
        let states: [UInt64: Int32] = try await stack.database("social").read { db in
            var states: [UInt64: Int32] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT id, state FROM friend_requests WHERE from_user IN (\(list))") {
                let id: UInt64 = row[0], state: Int32 = row[1]
                states[id] = state
            }
            return states
        }
        #expect(states.count == seen.requestsSent.count,
                "requests stored \(states.count), acknowledged \(seen.requestsSent.count): none lost, none made twice")
        for id in seen.requestsCancelled {
            #expect(states[id] == SocialV1.RequestState.cancelled.rawValue, "request \(id): \(String(describing: states[id]))")
        }
    }

    /// Every acknowledged helpNow was raised once and reached both circle members by push and by
    /// SMS, once each.
    static func checkAlerts(_ acked: [AckedAlert], raisedBy initiators: [UInt64], in stack: LaunchedStack) async throws {
        let db = try stack.database("alerts")
        let raised: Int = try await db.read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM help_alerts WHERE initiator IN (?, ?)", arguments: [initiators[0], initiators[1]]) ?? 0
        }
        #expect(raised == acked.count, "alerts stored \(raised), acknowledged \(acked.count)")
        let expected = acked.count * 4
        let delivered = AlertsV1.DeliveryStatus.delivered.rawValue
        try await eventually("every helpNow delivery was sent", timeout: .seconds(60)) {
            let done: Int = try await db.read { db in
                try Int.fetchOne(db, sql: "SELECT count(*) FROM outbox WHERE source LIKE 'help_now:%' AND status = ?", arguments: [delivered]) ?? 0
            }
            return done >= expected
        }
        for alert in acked {
            let sent: [String] = try await db.read { db in
                try Row.fetchAll(db, sql: """
                    SELECT s.channel, s.address FROM sent_messages s JOIN outbox o ON s.idempotency_key = 'frienso-delivery-' || o.id
                    WHERE o.source = ?
                    """, arguments: ["help_now:\(alert.id)"]).map { row in
                    let channel: Int32 = row[0], address: String = row[1]
                    return "\(channel)/\(address)"
                }
            }
            #expect(sent.count == 4 && Set(sent).count == 4, "alert \(alert.id) (\(alert.message)): sent \(sent)")
            let copies: Int = try await db.read { db in
                try Int.fetchOne(db, sql: "SELECT count(*) FROM sent_messages WHERE body LIKE ?", arguments: ["%\(alert.message)%"]) ?? 0
            }
            #expect(copies == 4, "alert \(alert.id): \(copies) messages carry “\(alert.message)”")
        }
    }
}
