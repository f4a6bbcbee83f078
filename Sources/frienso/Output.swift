import ArgumentParser
import Foundation
import FriensoClient
import FriensoProto
import Wire

/// An error the CLI reports and turns into an exit code.
struct CLIError: Error {
    var message: String
    var code: StatusCode?
    var exitCode: Int32

    init(_ error: RPCError) {
        message = error.message
        code = error.code
        exitCode = error.code.exitCode
    }

    init(message: String, exitCode: Int32) {
        self.message = message
        self.exitCode = exitCode
    }
}

/// Runs a command body: prints the result as text or JSON, and errors with their status code.
func perform(_ global: GlobalOptions, _ body: () async throws -> (text: String, json: JSONValue)) async throws {
    do {
        let result = try await body()
        // A streaming command prints as it goes and returns nothing more to print.
        if !(result.text.isEmpty && result.json == .null) {
            print(global.json ? result.json.rendered(indent: 2) : result.text)
        }
    } catch let error as RPCError {
        try fail(global, CLIError(error))
    } catch let error as CLIError {
        try fail(global, error)
    }
}

/// `perform` with a client to the gateway, closed afterwards (also when the call fails).
/// - Parameter requireSession: fail with UNAUTHENTICATED before calling when no session is stored.
func performCall(
    _ global: GlobalOptions, requireSession: Bool = true,
    _ body: (FriensoClient) async throws -> (text: String, json: JSONValue)
) async throws {
    try await perform(global) {
        let client = try global.client(requireSession: requireSession)
        do {
            let result = try await body(client)
            await client.close()
            return result
        } catch {
            await client.close()
            throw error
        }
    }
}

private func fail(_ global: GlobalOptions, _ error: CLIError) throws -> Never {
    if global.json {
        var fields: [(String, JSONValue)] = [("message", .string(error.message))]
        if let code = error.code {
            fields.insert(("code", .string(code.name)), at: 0)
            fields.insert(("number", .number(Double(code.rawValue))), at: 1)
        }
        print(JSONValue.object([("error", .object(fields))]).rendered(indent: 2))
    }
    let label = error.code.map { "\($0.name) (\($0.rawValue))" } ?? "error"
    FileHandle.standardError.write(Data("frienso: \(label): \(error.message)\n".utf8))
    throw ExitCode(error.exitCode)
}

extension AccountsV1.Account {
    var text: String {
        let p = profile ?? AccountsV1.Profile()
        return """
            user      \(p.username) (id \(p.userId))
            name      \(p.firstName) \(p.lastName)
            email     \(email)
            phone     \(phone)
            picture   \(p.profilePictureMediaId.isEmpty ? "-" : p.profilePictureMediaId)
            """
    }
}

extension AccountsV1.Profile {
    var text: String {
        """
        user      \(username) (id \(userId))
        name      \(firstName) \(lastName)
        picture   \(profilePictureMediaId.isEmpty ? "-" : profilePictureMediaId)
        since     \(formatTime(createdAtMs))
        """
    }
}

/// A `*_ms` timestamp as ISO 8601 (UTC).
func formatTime(_ ms: Int64) -> String {
    Date(timeIntervalSince1970: Double(ms) / 1000).formatted(.iso8601)
}
