import Foundation
import FriensoTesting

/// Seeded mutations of valid encodings, in the manner of a fuzzer's mutators: bit flips, byte
/// runs set to interesting values, insertions, deletions, duplicated ranges, truncation, varints
/// claiming huge lengths, and splices of two inputs. Deterministic for a seed, so a failure
/// reproduces.
struct Mutator {
    var random: SplitMix

    init(seed: UInt64) { random = SplitMix(seed: seed) }

    mutating func int(_ upper: Int) -> Int { upper <= 0 ? 0 : Int(random.next() % UInt64(upper)) }

    static let interesting: [UInt8] = [0x00, 0x01, 0x7F, 0x80, 0xFF, 0x08, 0x0A, 0x12, 0x1A, 0x22]

    mutating func mutate(_ input: [UInt8], other: [UInt8]) -> [UInt8] {
        var b = input
        for _ in 0...int(4) {
            switch int(9) {
            case 0 where !b.isEmpty: // flip a bit
                let i = int(b.count)
                b[i] ^= 1 << UInt8(int(8))
            case 1 where !b.isEmpty: // an interesting byte
                b[int(b.count)] = Self.interesting[int(Self.interesting.count)]
            case 2: // insert random bytes
                let at = int(b.count + 1)
                b.insert(contentsOf: (0..<(1 + int(8))).map { _ in UInt8.random(in: 0...255, using: &random) }, at: at)
            case 3 where !b.isEmpty: // delete a range
                let at = int(b.count), n = min(b.count - at, 1 + int(16))
                b.removeSubrange(at..<(at + n))
            case 4 where !b.isEmpty: // duplicate a range
                let at = int(b.count), n = min(b.count - at, 1 + int(32))
                b.insert(contentsOf: b[at..<(at + n)], at: int(b.count + 1))
            case 5: // truncate
                b = Array(b.prefix(int(b.count + 1)))
            case 6: // a length-delimited field claiming a huge length
                let at = int(b.count + 1)
                b.insert(contentsOf: [UInt8(1 + int(15)) << 3 | 2, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F], at: at)
            case 7: // splice with another valid input
                let cut = int(b.count + 1), from = int(other.count + 1)
                b = Array(b.prefix(cut)) + other.suffix(from: from)
            default: // a random varint-looking run
                let at = int(b.count + 1)
                b.insert(contentsOf: (0..<(1 + int(10))).map { _ in UInt8(0x80 | int(128)) }, at: at)
            }
        }
        return b
    }
}

/// How many inputs each target gets: 20,000 in the test suite; more with
/// `FRIENSO_FUZZ_ITERATIONS=1000000 swift test --filter FuzzTests` (see docs/architecture.md).
let fuzzIterations: Int = {
    if let text = ProcessInfo.processInfo.environment["FRIENSO_FUZZ_ITERATIONS"], let n = Int(text), n > 0 { return n }
    return 20_000
}()

/// A fixed seed, or `FRIENSO_FUZZ_SEED` to explore further (printed with any failure).
let fuzzSeed: UInt64 = ProcessInfo.processInfo.environment["FRIENSO_FUZZ_SEED"].flatMap { UInt64($0) } ?? 0x5EED_F022
