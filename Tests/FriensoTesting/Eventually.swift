public import Foundation

public struct TimedOut: Error, CustomStringConvertible {
    public var description: String

    public init(description: String) {
        self.description = description
    }
}

/// Polls `condition` until it holds, with a bounded number of tries and growing pauses.
/// This is readiness waiting, not synchronisation by sleep: it returns as soon as the condition holds.
/// The default bound is `TestDeadline.patient`: it is reached only when the condition never holds,
/// never by a machine that is merely slow (see `TestDeadline`).
/// - Throws: `TimedOut` naming `what` when it never held within `timeout`.
public func eventually(
    _ what: String, timeout: Duration = TestDeadline.patient,
    _ condition: @Sendable () async throws -> Bool
) async throws {
    let until = ContinuousClock.now.advanced(by: timeout)
    var pause = Duration.milliseconds(5)
    while true {
        if (try? await condition()) == true { return }
        if ContinuousClock.now >= until { throw TimedOut(description: "timed out after \(timeout) waiting for \(what)") }
        try await Task.sleep(for: pause)
        pause = min(pause * 2, .milliseconds(200))
    }
}

/// Like `eventually`, for a condition that produces a value once it holds (nil until then).
public func eventuallyValue<T: Sendable>(
    _ what: String, timeout: Duration = TestDeadline.patient,
    _ produce: @Sendable () async throws -> T?
) async throws -> T {
    let until = ContinuousClock.now.advanced(by: timeout)
    var pause = Duration.milliseconds(5)
    while true {
        if let value = try? await produce() { return value }
        if ContinuousClock.now >= until { throw TimedOut(description: "timed out after \(timeout) waiting for \(what)") }
        try await Task.sleep(for: pause)
        pause = min(pause * 2, .milliseconds(200))
    }
}

/// A fresh directory under the system temp dir, removed by `remove()`.
public struct TemporaryDirectory: Sendable {
    public let url: URL
    public var path: String { url.path }

    public init(_ prefix: String = "frienso-test") throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    public func remove() {
        try? FileManager.default.removeItem(at: url)
    }
}

/// The repository checkout these tests were built from.
public enum Repository {
    public static let root: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
    }()

    /// Where SwiftPM put the executables: `FRIENSO_BIN_DIR`, else the test runner's own folder.
    public static let binaries: URL = {
        if let dir = ProcessInfo.processInfo.environment["FRIENSO_BIN_DIR"], !dir.isEmpty { return URL(fileURLWithPath: dir) }
        let runner = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var dir = runner.deletingLastPathComponent()
        // On Linux the runner is .build/<config>/friensoPackageTests.xctest (a file); on macOS a bundle.
        while !FileManager.default.fileExists(atPath: dir.appendingPathComponent("frienso-accounts").path), dir.path != "/" {
            dir.deleteLastPathComponent()
        }
        return dir
    }()

    public static func which(_ tool: String) -> String? {
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            let path = "\(dir)/\(tool)"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }
}

/// The Python test tools `deploy/install-deps --for-tests` puts in `.build/tools/python`.
public enum PythonTools {
    public static let folder = Repository.root.appendingPathComponent(".build/tools/python/bin")

    /// - Throws: when they are not installed, saying how to install them.
    public static func require() throws -> (python: String, schemathesis: String) {
        let python = folder.appendingPathComponent("python").path, schemathesis = folder.appendingPathComponent("schemathesis").path
        guard FileManager.default.isExecutableFile(atPath: python), FileManager.default.isExecutableFile(atPath: schemathesis) else {
            throw PythonToolsMissing()
        }
        return (python, schemathesis)
    }

    struct PythonToolsMissing: Error, CustomStringConvertible {
        var description: String { "schemathesis is not installed: run deploy/install-deps --for-tests (deploy/test does)" }
    }
}
