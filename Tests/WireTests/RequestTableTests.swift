import FriensoTesting
import Testing
@testable import Wire

/// `RequestTable`, the table of calls and requests in flight (item 107), checked against a
/// `Dictionary` doing the same operations.
@Suite("the table of requests in flight")
struct RequestTableTests {
    /// Random insertions, replacements, lookups and removals, from keys that step by one (as
    /// request ids do), by a stride, and at random: after every operation the table answers as
    /// the dictionary does, and holds what it holds.
    @Test(arguments: [KeyShape.consecutive, .strided, .random])
    func agreesWithADictionary(_ shape: KeyShape) {
        var random = SplitMix(seed: 107)
        var table = RequestTable<String>()
        var model: [UInt64: String] = [:]
        var issued: [UInt64] = []
        for step in 0..<20_000 {
            let roll = random.next() % 10
            if roll < 5 || issued.isEmpty {
                let key = shape.key(issued.count, &random)
                issued.append(key)
                let value = "v\(step)"
                #expect(table.updateValue(value, forKey: key) == model.updateValue(value, forKey: key))
            } else {
                // An issued key (present or already removed), or one never issued.
                let key = roll == 9 ? random.next() : issued[Int(random.next() % UInt64(issued.count))]
                switch roll {
                case 5, 6: #expect(table.removeValue(forKey: key) == model.removeValue(forKey: key))
                case 7: #expect(table[key] == model[key])
                default:
                    let value = "r\(step)"
                    let replaced = model[key] == nil ? nil : model.updateValue(value, forKey: key)
                    if replaced != nil { #expect(table.updateValue(value, forKey: key) == replaced) }
                }
            }
            #expect(table.count == model.count)
        }
        #expect(Dictionary(uniqueKeysWithValues: table.map { ($0.key, $0.value) }) == model)
        for (key, value) in model { #expect(table[key] == value) }
    }

    /// Emptied in a random order after growing: every key left stays reachable after each
    /// removal (the backward shift moves entries without losing one), and the table ends empty.
    @Test func removalsInAnyOrder_leaveEveryOtherKeyReachable() {
        var random = SplitMix(seed: 7)
        var table = RequestTable<UInt64>()
        var keys = (1...2_000).map { UInt64($0) } + [0, .max, 1 << 63]
        for key in keys { table[key] = key &* 3 }
        keys.shuffle(using: &random)
        while let key = keys.popLast() {
            #expect(table.removeValue(forKey: key) == key &* 3)
            #expect(table[key] == nil)
            if keys.count % 97 == 0 { #expect(keys.allSatisfy { table[$0] == $0 &* 3 }) }
        }
        #expect(table.isEmpty && table.count == 0 && Array(table).isEmpty)
    }

    /// Iterating over the table while removing from it iterates over the table as it was, as with
    /// a `Dictionary` (the loops' `for (id, request) in pending { pending[id] = nil … }`).
    @Test func removingWhileIterating_seesTheTableAsItWas() {
        var table = RequestTable<Int>()
        for key in 1...100 { table[UInt64(key)] = key }
        var seen: [Int] = []
        for (key, value) in table {
            seen.append(value)
            table[key] = nil
        }
        #expect(seen.sorted() == Array(1...100))
        #expect(table.isEmpty)
    }

    /// The index API the relaying path uses: look, then take the entry where it was found.
    @Test func anIndexFound_readsAndRemovesThatEntry() throws {
        var table = RequestTable<String>()
        table[41] = "a"
        table[42] = "b"
        let index = try #require(table.index(forKey: 42))
        #expect(table.value(at: index) == "b")
        #expect(table.remove(at: index) == "b")
        #expect(table.index(forKey: 42) == nil && table[41] == "a" && table.count == 1)
    }

    /// A removed value leaves nothing behind: once the caller drops it, it is gone (no bucket,
    /// moved or emptied by the backward shift, still holds it).
    @Test func removedValues_areNotKeptByTheTable() {
        final class Token {}
        var table = RequestTable<Token>()
        var watched: [Weak] = []
        for key in 1...100 {
            let token = Token()
            watched.append(Weak(token))
            table[UInt64(key)] = token
        }
        #expect(watched.allSatisfy { $0.object != nil })
        for key in stride(from: 1, through: 100, by: 3) { table[UInt64(key)] = nil }
        #expect(watched.enumerated().allSatisfy { ($0.offset % 3 == 0) == ($0.element.object == nil) })
        table.removeAll()
        #expect(watched.allSatisfy { $0.object == nil })
    }

    struct Weak {
        weak var object: AnyObject?
        init(_ object: AnyObject) { self.object = object }
    }

    @Test func removeAll_emptiesAndStaysUsable() {
        var table = RequestTable<Int>()
        for key in 1...50 { table[UInt64(key)] = key }
        table.removeAll()
        #expect(table.isEmpty && table[7] == nil)
        table[7] = 70
        #expect(table[7] == 70 && table.count == 1 && table.values.map { $0 } == [70])
    }

    enum KeyShape: CaseIterable, Sendable {
        case consecutive, strided, random

        func key(_ n: Int, _ random: inout SplitMix) -> UInt64 {
            switch self {
            case .consecutive: UInt64(n + 1)
            // Every 64th id: what one loop sees of a client that spreads its calls over instances.
            case .strided: UInt64(n) * 64 + 5
            case .random: random.next()
            }
        }
    }
}
