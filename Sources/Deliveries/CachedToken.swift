import Foundation

/// A credential made when needed and kept until it expires (FCM's OAuth access token, APNs'
/// provider JWT). Callers arriving while one is being made wait for that one: a burst of sends
/// makes one token, not one each (APNs counts every new token; Google every exchange).
actor CachedToken {
    typealias Made = (token: String, until: Date)
    private let make: @Sendable () async throws -> Made
    private var current: Made?
    private var pending: Task<Made, any Error>?

    /// - Parameter make: a new token and until when it may be used.
    init(_ make: @escaping @Sendable () async throws -> Made) {
        self.make = make
    }

    func get() async throws -> String {
        if let current, current.until > Date() { return current.token }
        if let pending { return try await pending.value.token }
        let task = Task { try await make() }
        pending = task
        defer { pending = nil }
        let made = try await task.value
        current = made
        return made.token
    }

    /// Forgets `token` (the provider refused it): the next `get` makes another.
    func invalidate(_ token: String) {
        if current?.token == token { current = nil }
    }
}
