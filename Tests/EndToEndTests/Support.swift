import Foundation
import FriensoTesting
import Testing
import Wire


/// Runs the real `frienso` CLI against `gateway` with its own config dir.
struct CLI {
    let gateway: String
    let configDir: String

    func run(_ arguments: [String], stdin: String? = nil) async throws -> (status: Int32, output: String) {
        try await ProcessHarness.run("frienso", arguments, stdin: stdin,
                               environment: ["FRIENSO_GATEWAY": gateway, "FRIENSO_CONFIG_DIR": configDir])
    }
}

/// Reads an endpoint file once the process has written it.
func endpoint(in path: String) async throws -> String {
    try await eventually("\(path) is written") {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").hasSuffix("\n")
    }
    return try String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
}
