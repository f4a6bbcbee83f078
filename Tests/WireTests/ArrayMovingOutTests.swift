import FriensoProto
import Testing
@testable import Wire

/// `Array.forEachMovedOut`: how a host hands a batch of requests to their tasks and drains its
/// command queue (item 106): every element once, in order, the filler left behind.
@Suite("moving elements out of an array")
struct ArrayMovingOutTests {
    /// A class instance per element, so that a copy left in the array would show as a second reference.
    final class Token {
        let number: Int
        init(_ number: Int) { self.number = number }
    }

    @Test func everyElementOnce_inOrder_theFillerLeft() {
        var array = (0..<5).map { Token($0) }
        let filler = Token(-1)
        var seen: [Int] = []
        var unique: [Bool] = []
        array.forEachMovedOut(leaving: { filler }) { (element: consuming Token) in
            seen.append(element.number)
            // Moved, not copied: the array's slot holds the filler, so this is the only reference.
            unique.append(isKnownUniquelyReferenced(&element))
        }
        #expect(seen == [0, 1, 2, 3, 4])
        #expect(unique == [true, true, true, true, true])
        #expect(array.count == 5 && array.allSatisfy { $0 === filler })
    }

    @Test func anEmptyArray_callsNothing() {
        var array: [String] = []
        var calls = 0
        array.forEachMovedOut(leaving: { "" }) { _ in calls += 1 }
        #expect(calls == 0)
    }

    @Test func aHostsCommands_repliesInTheOrderPosted() {
        var commands: [HostCommand] = (1...3).map { .reply(key: UInt64($0), envelope: Envelope(requestId: UInt64($0))) } + [.drain]
        var keys: [UInt64] = []
        var drained = false
        commands.forEachMovedOut(leaving: { .stop }) { command in
            switch command {
            case .reply(let key, let envelope):
                #expect(envelope.requestId == key)
                keys.append(key)
            case .drain: drained = true
            default: Issue.record("only replies and the drain were posted")
            }
        }
        #expect(keys == [1, 2, 3] && drained)
    }
}
