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

    /// The duration in whole nanoseconds (for Dispatch's intervals, commit timings and the
    /// request-duration metric).
    public var wholeNanoseconds: Int64 {
        if let attoseconds = Int64(exactly: attoseconds) { return attoseconds / 1_000_000_000 }
        let c = components
        return c.seconds * 1_000_000_000 + c.attoseconds / 1_000_000_000
    }
}
