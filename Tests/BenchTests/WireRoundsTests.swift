@testable import Bench
import Testing

@Suite("wire's rounds at more than 1 in flight")
struct WireRoundsTests {
    /// Rounds taking turns are read as the median of each round's Wire ÷ raw rate, with the
    /// spread, per level in flight: one round's drift (here a raw round twice as fast) moves the
    /// spread, not the figure.
    @Test("the report gives the median of the rounds' rate ratios and their spread, per level")
    func ratesTakingTurns_areReadAsTheMedianOfTheRounds() {
        let turns = [
            WireScenario.RateTurn(inFlight: 64, raw: 500_000, wire: 300_000),
            WireScenario.RateTurn(inFlight: 64, raw: 1_000_000, wire: 310_000),
            WireScenario.RateTurn(inFlight: 64, raw: 500_000, wire: 320_000),
            WireScenario.RateTurn(inFlight: 8, raw: 200_000, wire: 100_000),
        ]
        let report = WireScenario.report([], rateTurns: turns)
        #expect(report.contains("- 8 in flight, 1 rounds taking turns: Wire client → host / raw DEALER/ROUTER req/s per round, median 50% (50–50%; target ≥ 60%)"),
                "\(report)")
        #expect(report.contains("- 64 in flight, 3 rounds taking turns: Wire client → host / raw DEALER/ROUTER req/s per round, median 60% (31–64%; target ≥ 60%)"),
                "\(report)")
        #expect(report.range(of: "- 8 in flight")!.lowerBound < report.range(of: "- 64 in flight")!.lowerBound)
    }
}
