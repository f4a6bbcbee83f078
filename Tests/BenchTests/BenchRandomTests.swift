@testable import Bench
import Testing

@Suite("the load loops' random numbers")
struct BenchRandomTests {
    /// The stream the load loops share (item 146) stays within its bound, reaches every value of
    /// a small one, and wraps its state instead of trapping (it had trapped on overflow, the
    /// stream's state being an atomic counter).
    @Test("the shared stream stays within its bound, covers it, and runs past its state's wrap")
    func theSharedStream_staysWithinItsBound_andCoversIt() {
        var seen = Set<Int>()
        for _ in 0..<10_000 {
            let value = BenchRandom.shared(below: 7)
            #expect((0..<7).contains(value))
            seen.insert(value)
        }
        #expect(seen == Set(0..<7))
        // 2⁶⁴ / the increment ≈ 1.6 draws wrap the state: far fewer than drawn above.
        let units = (0..<1_000).map { _ in BenchRandom.sharedUnit() }
        #expect(units.allSatisfy { $0 >= 0 && $0 < 1 })
        #expect(Set(units).count > 990)
    }
}
