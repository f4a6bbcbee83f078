import Glibc

/// A point in time as the reactors keep it: whole nanoseconds on the clock `ContinuousClock`
/// reads on Linux (`CLOCK_BOOTTIME`: monotonic, and counting time the machine was suspended).
///
/// Why not `ContinuousClock.Instant` (issue 16, item 109): it is resilient (not `@frozen`), so
/// every value that holds one (a request in flight, a call's deadline, an optional deadline) is
/// copied, compared and destroyed through value witnesses and calls into the runtime, and each
/// reading of the clock goes through `swift_get_time` and a `Duration` made from its parts: about
/// 2,000 instructions of a request through the gateway. A `Moment` is one `Int64`, compared
/// inline, read with one `clock_gettime`.
public struct Moment: Comparable, Hashable, Sendable, CustomStringConvertible {
    /// Nanoseconds since the clock's origin (boot).
    public var nanoseconds: Int64

    public init(nanoseconds: Int64) {
        self.nanoseconds = nanoseconds
    }

    /// Now, on the reactors' clock.
    public static var now: Moment {
        var time = timespec()
        // CLOCK_BOOTTIME exists on every Linux this runs on; a failure would leave zero, the
        // clock's origin, which only makes every deadline look far away.
        _ = clock_gettime(CLOCK_BOOTTIME, &time)
        return Moment(nanoseconds: Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec))
    }

    /// This moment moved by `duration` (whole nanoseconds; saturating, never trapping).
    public func advanced(by duration: Duration) -> Moment {
        advanced(byNanoseconds: duration.wholeNanoseconds)
    }

    public func advanced(byNanoseconds nanoseconds: Int64) -> Moment {
        let (sum, overflow) = self.nanoseconds.addingReportingOverflow(nanoseconds)
        return Moment(nanoseconds: overflow ? (nanoseconds > 0 ? .max : .min) : sum)
    }

    public func advanced(byMilliseconds milliseconds: Int64) -> Moment {
        let (product, overflow) = milliseconds.multipliedReportingOverflow(by: 1_000_000)
        return advanced(byNanoseconds: overflow ? (milliseconds > 0 ? .max : .min) : product)
    }

    /// From this moment to `other`, in nanoseconds (negative when `other` is earlier).
    public func nanoseconds(to other: Moment) -> Int64 {
        other.nanoseconds &- nanoseconds
    }

    public func duration(to other: Moment) -> Duration {
        .nanoseconds(nanoseconds(to: other))
    }

    public static func < (lhs: Moment, rhs: Moment) -> Bool {
        lhs.nanoseconds < rhs.nanoseconds
    }

    public var description: String { "Moment(\(nanoseconds) ns)" }
}
