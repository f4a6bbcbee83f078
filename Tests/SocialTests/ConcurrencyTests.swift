import FriensoProto
import FriensoTesting
import Social
import SocialReplica
import Synchronization
import Testing
import Wire

/// The rules that read before they write, under changes that run at once. SQLite runs one
/// mutation at a time; PostgreSQL runs them together, and the store's locks must keep each rule.
@Suite("social: concurrent changes", .serialized, .timeLimit(.minutes(2)))
struct ConcurrencyTests {
    /// Whether the add went in: true, or false when the circle was full (any other error throws).
    static func added(_ owner: Person, _ request: SocialV1.AddToCircleRequest) async throws -> Bool {
        do {
            _ = try await owner.call(API.addToCircle, request)
            return true
        } catch {
            guard error.code == .failedPrecondition, error.message.contains("full") else { throw error }
            return false
        }
    }

    @Test("pairs asking each other at once each make exactly one friendship", arguments: Engine.allCases)
    func mutualRequests(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            var people: [(Person, String)] = []
            for i in 0..<24 { people.append((try await stack.user("m_\(i)").client, "m_\(i)")) }
            let collapsed = try await withThrowingTaskGroup(of: Bool.self) { group in
                for pair in stride(from: 0, to: people.count, by: 2) {
                    let (a, aName) = people[pair], (b, bName) = people[pair + 1]
                    group.addTask { try await a.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: bName)).becameFriends }
                    group.addTask { try await b.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: aName)).becameFriends }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(collapsed == people.count / 2, "one of each pair's two requests collapses")
            for pair in stride(from: 0, to: people.count, by: 2) {
                let (a, _) = people[pair], (_, bName) = people[pair + 1]
                let friends = try await a.call(API.listFriends, SocialV1.ListFriendsRequest()).friends.map { $0.user?.username ?? "" }
                #expect(friends == [bName])
                let requests = try await a.call(API.listFriendRequests, SocialV1.ListFriendRequestsRequest())
                #expect(requests.incoming.isEmpty && requests.outgoing.isEmpty, "no request stays pending")
            }
        }
    }

    @Test("adds to one circle at once never pass its limit", arguments: Engine.allCases)
    func circleLimit(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (owner, _) = try await stack.user("cl_owner")
            var names: [String] = []
            for i in 0..<8 {
                let name = "cl_\(i)"
                let (friend, _) = try await stack.user(name)
                _ = try await owner.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: name))
                _ = try await friend.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "cl_owner"))
                names.append(name)
            }
            let added = try await withThrowingTaskGroup(of: Bool.self) { group in
                for name in names {
                    group.addTask { try await Self.added(owner, SocialV1.AddToCircleRequest(username: name)) }
                }
                for i in 0..<4 {
                    group.addTask { try await Self.added(owner, SocialV1.AddToCircleRequest(phone: "+1562555010\(i)")) }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(added == 3)
            #expect(try await owner.call(API.showCircle, SocialV1.ShowCircleRequest()).members.count == 3)
        }
    }

    @Test("pokes of one pair at once: one goes through, the rest wait their interval", arguments: Engine.allCases)
    func pokeInterval(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (rex, _) = try await stack.user("cp_rex")
            let (sue, _) = try await stack.user("cp_sue")
            _ = try await rex.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "cp_sue"))
            _ = try await sue.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "cp_rex"))
            let through = try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        do {
                            _ = try await rex.call(API.poke, SocialV1.PokeRequest(username: "cp_sue"))
                            return true
                        } catch let error as RPCError where error.code == .resourceExhausted {
                            return false
                        }
                    }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(through == 1)
        }
    }

    /// Instances of social that share a database run their mutations at once: the rules hold
    /// there through the database's locks, not the instance's own ordering.
    @Test("two instances on one PostgreSQL database: each pair asking each other through both makes one friendship; one circle's limit holds")
    func twoInstances() async throws {
        let storage = try await TestStorage.fresh(.postgres, service: "social")
        let temp = try TemporaryDirectory("frienso-social")
        defer { temp.remove() }
        let logs = CapturedLogs()
        let accounts = RouterClient(try accountsService(temp.path), name: "accounts", logger: logs.logger("accounts"))
        let first = try await storage.open(), second = try await storage.open()
        do {
            let relays = [EventRecorder(), EventRecorder()]
            let serviceOne = try await SocialService.open(first, accounts: accounts, publisher: relays[0])
            let one = RouterClient(serviceOne, name: "social", logger: logs.logger("social-1"))
            let two = RouterClient(try await SocialService.open(second, accounts: accounts, publisher: relays[1]), name: "social", logger: logs.logger("social-2"))
            let viaOne = InProcessGateway(["accounts": accounts, "social": one]), viaTwo = InProcessGateway(["accounts": accounts, "social": two])
            let stack = SocialStack(gateway: viaOne, social: one, events: EventRecorder(), logs: logs, service: serviceOne)
            var ids: [UInt64] = []
            for i in 0..<24 { ids.append(try await stack.user("ti_\(i)").id) }
            let collapsed = try await withThrowingTaskGroup(of: Bool.self) { group in
                for pair in stride(from: 0, to: ids.count, by: 2) {
                    let a = viaOne.person(ids[pair]), b = viaTwo.person(ids[pair + 1])
                    let (aID, bID) = (ids[pair], ids[pair + 1])
                    group.addTask { try await a.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(userId: bID)).becameFriends }
                    group.addTask { try await b.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(userId: aID)).becameFriends }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(collapsed == ids.count / 2, "one of each pair's two requests collapses")
            for pair in stride(from: 0, to: ids.count, by: 2) {
                let friends = try await viaTwo.person(ids[pair]).call(API.listFriends, SocialV1.ListFriendsRequest()).friends
                #expect(friends.map { $0.user?.userId } == [ids[pair + 1]])
            }
            // Phone invitations need no friendship: eight at once, half through each instance.
            let owner = ids[0]
            let added = try await withThrowingTaskGroup(of: Bool.self) { group in
                for i in 0..<8 {
                    let person = (i % 2 == 0 ? viaOne : viaTwo).person(owner)
                    group.addTask { try await Self.added(person, SocialV1.AddToCircleRequest(phone: "+1562555020\(i)")) }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(added == 3)
            // One graph stream, numbered by the database, whichever instance committed: each
            // instance relays all of it, 1…n, no gap, no repeat.
            let head = try await one.call(API.graphSnapshot, SocialV1.GraphSnapshotRequest(sequenceOnly: true)).sequence
            #expect(head >= UInt64(ids.count / 2), "a friendship per pair at least: \(head)")
            for recorder in relays {
                try await eventually("every graph event relayed by each instance") {
                    recorder.relayed.filter { $0.topic == SocialService.graphStream }.count >= Int(head)
                }
                #expect(recorder.relayed.filter { $0.topic == SocialService.graphStream }.map(\.sequence) == Array(1...head))
            }
            await first.close()
            await second.close()
        } catch {
            await first.close()
            await second.close()
            await storage.remove()
            throw error
        }
        await storage.remove()
    }

    /// A replica applies the graph events in their numbers' order: for what it holds to be what
    /// the database holds, the events about each pair must be numbered in commit order.
    @Test("both people of a pair changing it at once: a replica fed every event, in order, ends where the database is",
          arguments: Engine.allCases)
    func eventsInCommitOrder(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            var people: [(Person, UInt64)] = []
            for i in 0..<12 { people.append(try await stack.user("ev_\(i)")) }
            try await stack.graphEventsRelayed()
            _ = stack.events.take()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in people.indices {
                    let me = people[index].0, other = people[index ^ 1].1
                    group.addTask {
                        for round in 0..<12 {
                            // Refusals (already friends, not blocked…) are part of the churn.
                            switch (round + index) % 4 {
                            case 0: _ = try? await me.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(userId: other))
                            case 1: _ = try? await me.call(API.removeFriend, SocialV1.RemoveFriendRequest(userId: other))
                            case 2: _ = try? await me.call(API.block, SocialV1.BlockRequest(userId: other))
                            default: _ = try? await me.call(API.unblock, SocialV1.UnblockRequest(userId: other))
                            }
                            _ = try? await me.call(API.setFindable, SocialV1.SetFindableRequest(findable: round % 3 != 0))
                        }
                    }
                }
                try await group.waitForAll()
            }
            try await stack.graphEventsRelayed()
            var replayed = GraphState()
            for event in stack.events.all where event.topic == SocialService.graphStream {
                replayed.apply(try SocialV1.GraphEvent(serializedBytes: event.payload))
            }
            let stored = GraphState(snapshot: try await stack.social.call(API.graphSnapshot, SocialV1.GraphSnapshotRequest()))
            #expect(stored.friendshipCount + people.count > 0)
            for (a, b) in zip(people.map(\.1), people.map(\.1).reversed()) {
                #expect(replayed.areFriends(a, b) == stored.areFriends(a, b), "friends \(a) \(b)")
                #expect(replayed.blocked(a, b) == stored.blocked(a, b), "block \(a) \(b)")
            }
            for (_, id) in people {
                #expect(replayed.friends(of: id) == stored.friends(of: id))
                #expect(replayed.blockedEitherWay(id) == stored.blockedEitherWay(id))
                #expect(replayed.isFindable(id) == stored.isFindable(id), "findable \(id)")
            }
        }
    }

    /// Alerts reads notices as "every one after the last id I stored": a notice whose id is
    /// smaller than one already read, committed later, would never be delivered.
    @Test("a reader pulling notices while many are written misses none", arguments: Engine.allCases)
    func noticesInCommitOrder(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            var people: [(Person, String)] = []
            for i in 0..<16 { people.append((try await stack.user("n_\(i)").client, "n_\(i)")) }
            for pair in stride(from: 0, to: people.count, by: 2) {
                let (a, aName) = people[pair], (b, bName) = people[pair + 1]
                _ = try await a.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: bName))
                _ = try await b.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: aName))
            }
            let writing = Flag()
            let social = stack.social
            async let read: [UInt64] = {
                var seen: [UInt64] = []
                var after: UInt64 = 0
                while true {
                    let done = !writing.value.load(ordering: .acquiring)
                    let page = try await social.call(API.listNotices, SocialV1.ListNoticesRequest(afterId: after)).notices
                    seen += page.map(\.noticeId)
                    after = page.last?.noticeId ?? after
                    if done && page.isEmpty { return seen }
                }
            }()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, (person, _)) in people.enumerated() {
                    let other = people[index ^ 1].1
                    group.addTask { _ = try await person.call(API.poke, SocialV1.PokeRequest(username: other)) }
                    group.addTask { _ = try await person.call(API.addToCircle, SocialV1.AddToCircleRequest(phone: "+1562555\(String(format: "%04d", index))")) }
                }
                try await group.waitForAll()
            }
            writing.value.store(false, ordering: .releasing)
            let seen = try await read
            let all = try await social.call(API.listNotices, SocialV1.ListNoticesRequest()).notices.map(\.noticeId)
            #expect(all.count == people.count * 2)
            #expect(seen == all, "the reader saw every notice, each once, in id order")
        }
    }
}

/// A flag tasks share.
private final class Flag: Sendable {
    let value = Atomic<Bool>(true)
}
