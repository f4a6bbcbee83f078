public import Testing
public import Wire

/// Argon2id with libsodium's smallest sensible cost, for test stacks that are not about
/// passwords: the whole suite registers many users in parallel on two cores.
public enum TestHashing {
    public static let opsLimit: UInt64 = 1
    public static let memLimit = 8 << 20
    public static let lanes = 2
}

/// Expects `body` to fail with `code`, and its message to contain `text` (when given).
public func expectError(
    _ code: StatusCode, containing text: String = "", _ body: () async throws -> Void,
    sourceLocation: SourceLocation = #_sourceLocation
) async {
    do {
        try await body()
        Issue.record("expected \(code.name), got success", sourceLocation: sourceLocation)
    } catch let error as RPCError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        #expect(text.isEmpty || error.message.contains(text), "\"\(error.message)\" should mention \"\(text)\"", sourceLocation: sourceLocation)
    } catch {
        Issue.record("unexpected error \(error)", sourceLocation: sourceLocation)
    }
}
