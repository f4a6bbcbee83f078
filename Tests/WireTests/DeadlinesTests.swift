import Testing
@testable import Wire

/// The budget a request hands to the calls it makes (`Deadlines.downstreamBudget`): what is
/// left, less a tenth and at most 100 ms, and never under 1 ms. Upper bounds are exact (time
/// only passes); lower bounds leave a stalled machine a wide margin.
@Suite("downstream budgets")
struct DownstreamBudgetTests {
    @Test func aTenthOffAtMost100ms_never_under1ms() {
        let far = Deadlines.downstreamBudget(until: .now.advanced(by: .seconds(10)))
        #expect(far <= .milliseconds(9_900) && far > .seconds(8), "\(far)")
        let near = Deadlines.downstreamBudget(until: .now.advanced(by: .milliseconds(500)))
        #expect(near <= .milliseconds(450) && near > .milliseconds(200), "\(near)")
        #expect(Deadlines.downstreamBudget(until: .now.advanced(by: .microseconds(900))) == .milliseconds(1))
        #expect(Deadlines.downstreamBudget(until: .now.advanced(by: .seconds(-1))) == .milliseconds(1))
    }
}
