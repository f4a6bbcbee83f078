public import Testing
public import Wire

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
