extension Duration {
    /// Whole milliseconds (truncated toward zero): what `deadline_ms`, heartbeat intervals and
    /// socket options carry.
    public var wholeMilliseconds: Int64 {
        let c = components
        return c.seconds * 1000 + c.attoseconds / 1_000_000_000_000_000
    }

    /// The duration in whole nanoseconds (for Dispatch's intervals and commit timings).
    public var wholeNanoseconds: Int64 {
        let c = components
        return c.seconds * 1_000_000_000 + c.attoseconds / 1_000_000_000
    }
}
