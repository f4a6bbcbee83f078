extension Duration {
    /// Whole milliseconds (truncated toward zero): what `deadline_ms`, heartbeat intervals and
    /// socket options carry.
    public var wholeMilliseconds: Int64 {
        // Under 9.2 s (every request's latency and most deadlines) the attoseconds fit 64 bits,
        // and dividing them is a multiply; `components` divides 128-bit integers in the runtime
        // (about 190 instructions, three times a request: issue 16, item 62).
        if let attoseconds = Int64(exactly: attoseconds) { return attoseconds / 1_000_000_000_000_000 }
        let c = components
        return c.seconds * 1000 + c.attoseconds / 1_000_000_000_000_000
    }

    /// The duration in whole nanoseconds (for Dispatch's intervals, commit timings, the
    /// request-duration metric and `Moment`), clamped to `Int64`'s range: a duration of
    /// centuries (an option meaning "forever") saturates instead of trapping.
    public var wholeNanoseconds: Int64 {
        if let attoseconds = Int64(exactly: attoseconds) { return attoseconds / 1_000_000_000 }
        let c = components
        let (product, overflow) = c.seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return c.seconds > 0 ? .max : .min }
        let (sum, overflowed) = product.addingReportingOverflow(c.attoseconds / 1_000_000_000)
        return overflowed ? (c.seconds > 0 ? .max : .min) : sum
    }
}
