/// Every login rule as one pure value, fed the outcome of each login and asked before each
/// attempt. Three limits, each with its own lockout that doubles per further failure:
/// - per account: failures naming one login (password guessing against one person);
/// - per client address: failures from one address, whatever account (one client, many tries);
/// - spraying: distinct accounts one address failed on (one password tried across many people,
///   slowly enough to stay under the per-client count).
/// Its state is a function of the events it was given, in order, so accounts stores the events
/// (`login_events`) and replays them at start: a restart forgets nothing.
public struct LoginGuard: Sendable {
    public struct Policy: Sendable {
        public var account: LoginThrottle.Policy
        public var client: LoginThrottle.Policy
        /// `maxFailures` here counts distinct accounts failed from one address within `window`.
        public var spraying: LoginThrottle.Policy

        public init(account: LoginThrottle.Policy = .init(maxFailures: 5),
                    client: LoginThrottle.Policy = .init(maxFailures: 20),
                    spraying: LoginThrottle.Policy = .init(maxFailures: 10, window: 3_600, baseLockout: 300, maxLockout: 86_400)) {
            self.account = account
            self.client = client
            self.spraying = spraying
        }

        /// How far back events still matter: the longest window plus the longest lockout.
        public var horizon: Double {
            [account, client, spraying].map { $0.window + $0.maxLockout }.max() ?? 0
        }
    }

    public enum Event: Sendable, Equatable {
        case failure(account: String, client: String, at: Double)
        case success(account: String, at: Double)
    }

    /// Why an attempt is refused, and for how long.
    public enum Refusal: Sendable, Equatable {
        case account(wait: Double)
        case client(wait: Double)
        case spraying(wait: Double)

        public var wait: Double {
            switch self {
            case .account(let wait), .client(let wait), .spraying(let wait): wait
            }
        }

        /// For the RESOURCE_EXHAUSTED reply: which limit, and the wait in whole seconds.
        public var message: String {
            let seconds = Int(wait.rounded(.up))
            switch self {
            case .account: return "too many failed logins for this account: try again in \(seconds) s"
            case .client: return "too many failed logins from your address: try again in \(seconds) s"
            case .spraying: return "failed logins on too many accounts from your address: try again in \(seconds) s"
            }
        }
    }

    public let policy: Policy
    private var accounts: LoginThrottle
    private var clients: LoginThrottle
    private var spraying: LoginThrottle
    /// Per address, when each account last failed from it (to count each account once a window).
    private var sprayed: [String: [String: Double]] = [:]

    public init(policy: Policy) {
        self.policy = policy
        accounts = LoginThrottle(policy: policy.account)
        clients = LoginThrottle(policy: policy.client)
        spraying = LoginThrottle(policy: policy.spraying)
    }

    /// Nil when an attempt for `account` from `client` may go ahead now. An empty client (no
    /// address known: in-process calls) is checked per account only.
    public func check(account: String, client: String, now: Double) -> Refusal? {
        if let wait = accounts.retryAfter(account, now: now) { return .account(wait: wait) }
        guard !client.isEmpty else { return nil }
        if let wait = spraying.retryAfter(client, now: now) { return .spraying(wait: wait) }
        if let wait = clients.retryAfter(client, now: now) { return .client(wait: wait) }
        return nil
    }

    /// Whether a success for `account` would change anything (it clears the account's failures):
    /// when not, it need not be recorded.
    public func successMatters(for account: String) -> Bool { accounts.isTracking(account) }

    public mutating func apply(_ event: Event) {
        switch event {
        case .failure(let account, let client, let now):
            accounts.recordFailure(account, now: now)
            guard !client.isEmpty else { return }
            clients.recordFailure(client, now: now)
            var seen = sprayed[client, default: [:]].filter { now - $0.value < policy.spraying.window }
            if seen[account] == nil { spraying.recordFailure(client, now: now) }
            seen[account] = now
            sprayed[client] = seen
            if sprayed.count > 100_000 { sprayed = sprayed.filter { $0.value.values.contains { now - $0 < policy.spraying.window } } }
        case .success(let account, _):
            accounts.recordSuccess(account)
        }
    }
}
