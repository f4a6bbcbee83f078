import Foundation

/// Size-based rotation of a log file its writer keeps open with `O_APPEND` (the launcher's
/// children write to theirs through an inherited descriptor, so the file cannot be renamed away
/// from them): the older copies shift (`.1` → `.2` …, the oldest dropped), the file is copied to
/// `.1` and then emptied in place, and the writer's next line lands at the start. A line written
/// between the copy and the emptying (the time to copy the file) is lost; everything else is
/// kept, in order.
public struct LogRotation: Sendable {
    public var maxBytes: Int
    public var keep: Int

    public init(maxBytes: Int = 64 << 20, keep: Int = 5) {
        self.maxBytes = max(4_096, maxBytes)
        self.keep = max(1, keep)
    }

    /// - Returns: whether it rotated.
    @discardableResult
    public func rotateIfNeeded(_ path: String) throws -> Bool {
        let fm = FileManager.default
        guard let size = (try? fm.attributesOfItem(atPath: path))?[.size] as? Int, size > maxBytes else { return false }
        try? fm.removeItem(atPath: "\(path).\(keep)")
        for n in stride(from: keep - 1, through: 1, by: -1) where fm.fileExists(atPath: "\(path).\(n)") {
            try fm.moveItem(atPath: "\(path).\(n)", toPath: "\(path).\(n + 1)")
        }
        try fm.copyItem(atPath: path, toPath: "\(path).1")
        // What the writer added during the copy goes to the copy too, then the file is emptied.
        let copied = (try? fm.attributesOfItem(atPath: "\(path).1"))?[.size] as? Int ?? 0
        if let source = FileHandle(forReadingAtPath: path), let target = FileHandle(forWritingAtPath: "\(path).1") {
            try source.seek(toOffset: UInt64(copied))
            try target.seekToEnd()
            if let rest = try source.readToEnd() { try target.write(contentsOf: rest) }
            try source.close()
            try target.close()
        }
        guard truncate(path, 0) == 0 else { throw SupervisorError("cannot empty \(path): errno \(errno)") }
        return true
    }
}
