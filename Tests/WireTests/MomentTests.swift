import Testing
@testable import Wire

/// `Moment`, the reactors' clock (item 109): arithmetic in whole nanoseconds, saturating.
@Suite("the reactors' moments")
struct MomentTests {
    @Test func advancingAndMeasuring_agreeInEveryUnit() {
        let start = Moment(nanoseconds: 1_000)
        #expect(start.advanced(by: .milliseconds(250)) == start.advanced(byMilliseconds: 250))
        #expect(start.advanced(by: .microseconds(3)) == start.advanced(byNanoseconds: 3_000))
        #expect(start.advanced(by: .seconds(10)).nanoseconds == 10_000_001_000) // past 9.2 s: the slow conversion
        #expect(start.advanced(by: .milliseconds(-1)).nanoseconds == -999_000)
        let later = start.advanced(byMilliseconds: 1_500)
        #expect(start.nanoseconds(to: later) == 1_500_000_000 && later.nanoseconds(to: start) == -1_500_000_000)
        #expect(start.duration(to: later) == .milliseconds(1_500))
        #expect(start < later && !(later < start) && start <= start && max(start, later) == later)
    }

    /// A deadline centuries away (an option set to "forever") saturates instead of trapping.
    @Test func farMoments_saturate() {
        let now = Moment(nanoseconds: 5)
        #expect(now.advanced(by: .seconds(Int64.max / 2)).nanoseconds == .max)
        #expect(now.advanced(by: .seconds(-Int64.max / 2)).nanoseconds == .min + 5) // clamped to .min ns, then added without overflow
        #expect(now.advanced(byMilliseconds: .max).nanoseconds == .max)
        #expect(Moment(nanoseconds: .max - 1).advanced(byNanoseconds: 10).nanoseconds == .max)
    }

    /// The clock never goes back between two readings on one thread.
    @Test func now_doesNotGoBack() {
        var last = Moment.now
        for _ in 0..<1_000 {
            let next = Moment.now
            #expect(next >= last)
            last = next
        }
        #expect(last.nanoseconds > 0)
    }
}
