import Foundation

/// Wall-clock time as the contracts carry it: milliseconds since 1970 (`*_ms` fields).
public enum WallClock {
    public static func milliseconds() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
}
