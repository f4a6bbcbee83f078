public import FriensoProto
import Foundation
import Logging
public import Storage
import Identity
import Synchronization
public import Wire

/// Tunables of the accounts service.
public struct AccountsConfig: Sendable {
    public var sessionTTL: Double = 30 * 86_400
    public var hasher: PasswordHasher = .owasp
    /// Failed logins per account, per client address, and distinct accounts failed per address
    /// (spraying), each before its lockout (see `LoginGuard`).
    public var loginPolicy = LoginGuard.Policy()
    /// Milliseconds since 1970; injectable so tests can move time.
    public var now: @Sendable () -> Int64 = { WallClock.milliseconds() }
    /// Where emails go (password reset codes); nil: the built-in recording provider.
    public var email: (any EmailProvider)?
    /// Forgotten passwords: codes and their limits.
    public var passwordReset = PasswordResetPolicy()
    /// How long an email that was sent or failed for good is kept in the outbox (address,
    /// subject, outcome; its body goes when it is sent), with the recording provider's copy.
    public var emailRetention: Duration = .seconds(90 * 86_400)

    /// The services that erase a deleted account's data (the executable names those the deployment
    /// has: social, geo, alerts, media); each gets `EraseUser` until it succeeds (`AccountsWorker`).
    public var erasureTargets: [String] = []
    /// After every service erased, each is asked once more this long after the first pass: a
    /// request that passed the gateway before the sessions were revoked may have landed since.
    public var erasureRecheck: Duration = .seconds(30)

    public init() {}
}

/// How password reset codes are given and checked.
public struct PasswordResetPolicy: Sendable {
    /// How long a code works.
    public var codeLifetime: Duration = .seconds(30 * 60)
    /// Codes an account gets an hour (further requests are answered alike and send nothing).
    public var codesPerAccountPerHour = 3
    /// Requests one client address may make an hour (then RESOURCE_EXHAUSTED).
    public var requestsPerClientPerHour = 10
    /// Wrong codes an account may be tried with before its live codes are void.
    public var attemptsPerAccount = 5

    public init() {}
}

/// Users, credentials, sessions and profiles.
public final class AccountsService: Sendable {
    public typealias API = AccountsV1.AccountsService

    let store: any AccountsStorage
    let config: AccountsConfig
    private let loginGuard: Mutex<LoginGuard>
    let events: (any NumberedEventSink)?
    let email: any EmailProvider
    private let blocks: BlockCheck?
    public let replyStore: AnyReplyStore

    /// Whether two users blocked each other (either way), from the social graph; nil while that
    /// is not known yet (the replica has not loaded its first snapshot).
    public typealias BlockCheck = @Sendable (UInt64, UInt64) -> Bool?

    /// The stream gateways follow to drop revoked sessions from their caches.
    public static let sessionsStream = "sessions"
    public static let sessionsRevoked = "accounts.SessionsRevoked"
    /// The stream social's profile replica follows (every public profile as it changes).
    public static let profilesStream = "profiles"
    public static let profileChanged = "accounts.ProfileChanged"

    /// Opens (or creates) `<directory>/accounts.sqlite` (the embedded engine).
    /// - Parameters:
    ///   - events: where session revocations and profile changes are announced (accounts' PUB
    ///     socket); its numbering is what `ProfilesSnapshot` reports.
    ///   - blocks: who blocked whom (a replica of social's graph), so a blocked user cannot read
    ///     the blocker's profile; nil in a deployment without social (no blocks exist there).
    public convenience init(directory: String, config: AccountsConfig = AccountsConfig(), events: (any NumberedEventSink)? = nil,
                            blocks: BlockCheck? = nil) throws {
        let store = try SQLiteAccountsStore(path: "\(directory)/accounts.sqlite")
        let recent = try store.loginEvents(since: Double(config.now()) / 1000 - config.loginPolicy.horizon)
        self.init(store: store, loginEvents: recent, config: config, events: events, blocks: blocks)
    }

    /// The streams accounts keeps in its database's event log on PostgreSQL.
    public static let keptStreams: Set<String> = [sessionsStream, profilesStream]

    /// Opens accounts' storage on `engine` (its migrations run first), as `init(directory:…)`.
    /// On PostgreSQL the events go to the database's event log (`PostgresEventLog`), in the
    /// mutations' transactions, and `events` relays them: any number of instances publish one stream.
    public static func open(_ engine: StorageEngine, config: AccountsConfig = AccountsConfig(), events: (any ServiceEventSink)? = nil,
                            blocks: BlockCheck? = nil) async throws -> AccountsService {
        switch engine {
        case .sqlite(let directory):
            return try AccountsService(directory: directory, config: config, events: events, blocks: blocks)
        case .postgres(let database):
            let store = try await PostgresAccountsStore.open(database)
            let log = try await PostgresEventLog.open(database, streams: keptStreams, publisher: events)
            let recent = try await store.loginEvents(since: Double(config.now()) / 1000 - config.loginPolicy.horizon)
            return AccountsService(store: store, loginEvents: recent, config: config, events: log, blocks: blocks)
        }
    }

    init(store: any AccountsStorage, loginEvents: [LoginGuard.Event], config: AccountsConfig, events: (any NumberedEventSink)?,
         blocks: BlockCheck?) {
        self.events = events
        self.blocks = blocks
        self.store = store
        self.config = config
        var guardState = LoginGuard(policy: config.loginPolicy)
        for event in loginEvents { guardState.apply(event) }
        loginGuard = Mutex(guardState)
        replyStore = AnyReplyStore(store.replies)
        email = config.email ?? RecordingEmailProvider(store: store, logger: Logger(label: "frienso.accounts.email"), now: config.now)
    }

    /// Announces `user`'s public profile as it is now (called in commit order).
    func profileChanged(_ user: UserRecord) {
        events?.emit(topic: Self.profilesStream, method: Self.profileChanged,
                     payload: AccountsV1.ProfileChanged(profile: user.profile).serializedBytes(), subject: user.id)
    }

    // MARK: Registration and login

    public func register(_ request: AccountsV1.RegisterRequest, _ context: RequestContext) async throws -> AccountsV1.RegisterResponse {
        let username = try Validation.username(request.username)
        let email = try Validation.email(request.email)
        let phone = try Validation.phone(request.phone)
        let password = try Validation.password(request.password)
        let first = try Validation.name(request.firstName, field: "first_name")
        let last = try Validation.name(request.lastName, field: "last_name")
        let hash = try await config.hasher.hash(password)
        let user = try await store.insertUser(username: username, email: email, phone: phone, passwordHash: hash,
                                              firstName: first, lastName: last, now: config.now()) { self.profileChanged($0) }
        context.logger.info("registered", metadata: ["user-id": "\(user.id)"])
        return AccountsV1.RegisterResponse(account: user.account)
    }

    public func login(_ request: AccountsV1.LoginRequest, _ context: RequestContext) async throws -> AccountsV1.LoginResponse {
        let name = try Validation.login(request.login)
        guard !request.password.isEmpty else { throw RPCError.invalidArgument("password: required") }
        let now = Double(config.now()) / 1000
        let accountKey = "\(name)"
        let clientKey = context.clientAddress
        // Shared storage (several instances): this login's guard is rebuilt from the outcomes
        // every instance stored; otherwise the process's guard has seen them all.
        var shared: LoginGuard?
        if store.isShared {
            var rebuilt = LoginGuard(policy: config.loginPolicy)
            for event in try await store.loginEvents(account: accountKey, client: clientKey, since: now - config.loginPolicy.horizon) {
                rebuilt.apply(event)
            }
            shared = rebuilt
        }
        let refusal = if let shared {
            shared.check(account: accountKey, client: clientKey, now: now)
        } else {
            loginGuard.withLock { $0.check(account: accountKey, client: clientKey, now: now) }
        }
        if let refusal {
            context.logger.notice("login refused by the throttle", metadata: ["client": "\(clientKey)", "reason": "\(refusal)"])
            throw RPCError.resourceExhausted(refusal.message)
        }
        let user = try await store.user(login: name)
        let valid = await config.hasher.verify(request.password, against: user?.passwordHash)
        guard let user, valid else {
            let failure = LoginGuard.Event.failure(account: accountKey, client: clientKey, at: now)
            try await store.record(failure, horizon: config.loginPolicy.horizon)
            loginGuard.withLock { $0.apply(failure) }
            context.logger.notice("failed login", metadata: ["client": "\(clientKey)"])
            throw RPCError.unauthenticated("wrong login or password")
        }
        // A success clears the account's failures; with none on record it changes nothing, and
        // costs no write.
        if shared?.successMatters(for: accountKey) ?? loginGuard.withLock({ $0.successMatters(for: accountKey) }) {
            let success = LoginGuard.Event.success(account: accountKey, at: now)
            try await store.record(success, horizon: config.loginPolicy.horizon)
            loginGuard.withLock { $0.apply(success) }
        }
        let (token, hash) = SessionToken.generate()
        let nowMs = config.now()
        let expires = nowMs + Int64(config.sessionTTL * 1000)
        let sessionID = try await store.createSession(userID: user.id, tokenHash: hash, now: nowMs, expiresAt: expires)
        context.logger.info("logged in", metadata: ["user-id": "\(user.id)", "session": "\(sessionID)"])
        return AccountsV1.LoginResponse(sessionToken: token, expiresAtMs: expires, account: user.account)
    }

    // MARK: Sessions

    public func validateSession(_ request: AccountsV1.ValidateSessionRequest, _ context: RequestContext) async throws -> AccountsV1.ValidateSessionResponse {
        guard let hash = SessionToken.hashIfWellFormed(request.sessionToken) else {
            throw RPCError.unauthenticated("not a session token: log in again")
        }
        guard let session = try await store.session(tokenHash: hash) else { throw RPCError.unauthenticated("unknown session: log in again") }
        guard !session.revoked else { throw RPCError.unauthenticated("session was revoked: log in again") }
        guard session.expiresAtMs > config.now() else { throw RPCError.unauthenticated("session expired: log in again") }
        return AccountsV1.ValidateSessionResponse(userId: session.userID, expiresAtMs: session.expiresAtMs,
                                                  sessionId: Self.encodeSessionID(session.id))
    }

    public func logout(_ request: AccountsV1.LogoutRequest, _ context: RequestContext) async throws -> AccountsV1.LogoutResponse {
        let caller = try context.requireCaller()
        let session = try await currentSession(context, caller: caller)
        try await store.revokeSession(id: session.id, userID: caller, now: config.now()) { self.announceRevocation(of: caller) }
        return AccountsV1.LogoutResponse()
    }

    public func whoAmI(_ request: AccountsV1.WhoAmIRequest, _ context: RequestContext) async throws -> AccountsV1.WhoAmIResponse {
        let caller = try context.requireCaller()
        let session = try await currentSession(context, caller: caller)
        guard let user = try await store.user(id: caller) else { throw RPCError.notFound("account no longer exists") }
        return AccountsV1.WhoAmIResponse(account: user.account, sessionExpiresAtMs: session.expiresAtMs)
    }

    /// The session the gateway says the caller is using; it must belong to the caller and be live.
    func currentSession(_ context: RequestContext, caller: UInt64) async throws -> SessionRecord {
        guard let id = Self.decodeSessionID(context.sessionID), let session = try await store.session(id: id),
              session.userID == caller, !session.revoked, session.expiresAtMs > config.now()
        else { throw RPCError.unauthenticated("no live session for this call: log in again") }
        return session
    }

    /// Tells every gateway, after the commit, to forget `user`'s cached sessions (they are checked
    /// with accounts again on their next use; the ones still live pass).
    func announceRevocation(of user: UInt64) {
        events?.emit(topic: Self.sessionsStream, method: Self.sessionsRevoked,
                     payload: AccountsV1.SessionsRevoked(userId: user).serializedBytes(), subject: user)
    }

    static func encodeSessionID(_ id: UInt64) -> [UInt8] {
        withUnsafeBytes(of: id.bigEndian, Array.init)
    }

    static func decodeSessionID(_ bytes: [UInt8]) -> UInt64? {
        guard bytes.count == 8 else { return nil }
        return bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }

    // MARK: Credentials

    public func changePassword(_ request: AccountsV1.ChangePasswordRequest, _ context: RequestContext) async throws -> AccountsV1.ChangePasswordResponse {
        let caller = try context.requireCaller()
        let session = try await currentSession(context, caller: caller)
        let newPassword = try Validation.password(request.newPassword, field: "new_password")
        guard let user = try await store.user(id: caller) else { throw RPCError.notFound("account no longer exists") }
        guard await config.hasher.verify(request.currentPassword, against: user.passwordHash) else {
            throw RPCError.permissionDenied("current_password is wrong")
        }
        guard request.currentPassword != newPassword else { throw RPCError.invalidArgument("new_password: must differ from the current one") }
        let hash = try await config.hasher.hash(newPassword)
        let revoked = try await store.changePassword(userID: caller, hash: hash, keepSession: session.id, now: config.now()) {
            self.announceRevocation(of: caller)
        }
        context.logger.info("password changed", metadata: ["user-id": "\(caller)", "revoked": "\(revoked)"])
        return AccountsV1.ChangePasswordResponse(revokedSessions: UInt32(revoked))
    }

    public func changeEmail(_ request: AccountsV1.ChangeEmailRequest, _ context: RequestContext) async throws -> AccountsV1.ChangeEmailResponse {
        let caller = try context.requireCaller()
        let email = try Validation.email(request.newEmail)
        guard let user = try await store.user(id: caller) else { throw RPCError.notFound("account no longer exists") }
        guard await config.hasher.verify(request.password, against: user.passwordHash) else {
            throw RPCError.permissionDenied("password is wrong")
        }
        guard email != user.email else { return AccountsV1.ChangeEmailResponse(account: user.account) }
        let updated = try await store.changeEmail(userID: caller, email: email)
        return AccountsV1.ChangeEmailResponse(account: updated.account)
    }

    // MARK: Profiles

    public func getProfile(_ request: AccountsV1.GetProfileRequest, _ context: RequestContext) async throws -> AccountsV1.GetProfileResponse {
        let caller = try context.requireCaller()
        let id = request.userId == 0 ? caller : request.userId
        guard let user = try await store.user(id: id) else { throw RPCError.notFound("no user \(id)") }
        if id != caller, let blocks {
            // Blocked either way: answered as if there were no such user, so a block cannot be probed.
            guard let blocked = blocks(caller, id) else {
                throw RPCError.unavailable("accounts is still loading the social graph: try again shortly")
            }
            if blocked { throw RPCError.notFound("no user \(id)") }
        }
        return AccountsV1.GetProfileResponse(profile: user.profile)
    }

    public func editProfile(_ request: AccountsV1.EditProfileRequest, _ context: RequestContext) async throws -> AccountsV1.EditProfileResponse {
        let caller = try context.requireCaller()
        let known: Set = ["first_name", "last_name", "profile_picture_media_id"]
        guard !request.fields.isEmpty else { throw RPCError.invalidArgument("fields: name at least one of \(known.sorted().joined(separator: ", "))") }
        if let unknown = request.fields.first(where: { !known.contains($0) }) {
            throw RPCError.invalidArgument("fields: unknown field \"\(unknown)\"")
        }
        let fields = Set(request.fields)
        let first = fields.contains("first_name") ? try Validation.name(request.firstName, field: "first_name") : nil
        let last = fields.contains("last_name") ? try Validation.name(request.lastName, field: "last_name") : nil
        let media = fields.contains("profile_picture_media_id") ? try Validation.mediaID(request.profilePictureMediaId) : nil
        let user = try await store.updateProfile(userID: caller, firstName: first, lastName: last, mediaID: media) { self.profileChanged($0) }
        return AccountsV1.EditProfileResponse(account: user.account)
    }

    /// A page of every public profile, for social's replica. The head is read before the rows:
    /// every event up to it is in them (see the proto).
    public func profilesSnapshot(_ request: AccountsV1.ProfilesSnapshotRequest, _ context: RequestContext) async throws -> AccountsV1.ProfilesSnapshotResponse {
        let limit = request.limit == 0 ? 5_000 : Int(request.limit)
        guard (1...10_000).contains(limit) else { throw RPCError.invalidArgument("limit: 1-10000") }
        await events?.catchUp() // the head covers every change committed before this call
        var page = AccountsV1.ProfilesSnapshotResponse(epoch: events?.epoch ?? 0,
                                                       sequence: events?.lastSequence(stream: Self.profilesStream) ?? 0)
        guard !request.sequenceOnly else { return page }
        let users = try await store.users(after: request.afterUserId, limit: limit + 1)
        page.profiles = users.prefix(limit).map(\.profile)
        page.more = users.count > limit
        return page
    }

    public func getProfiles(_ request: AccountsV1.GetProfilesRequest, _ context: RequestContext) async throws -> AccountsV1.GetProfilesResponse {
        guard request.userIds.count <= 500 else { throw RPCError.invalidArgument("user_ids: at most 500") }
        return AccountsV1.GetProfilesResponse(profiles: try await store.users(ids: request.userIds).map(\.profile))
    }

    public func contactDetails(_ request: AccountsV1.ContactDetailsRequest, _ context: RequestContext) async throws -> AccountsV1.ContactDetailsResponse {
        guard request.userIds.count <= 500 else { throw RPCError.invalidArgument("user_ids: at most 500") }
        return AccountsV1.ContactDetailsResponse(contacts: try await store.users(ids: request.userIds).map {
            AccountsV1.ContactDetails(profile: $0.profile, phone: $0.phone)
        })
    }

    public func searchUsers(_ request: AccountsV1.SearchUsersRequest, _ context: RequestContext) async throws -> AccountsV1.SearchUsersResponse {
        let prefix = request.prefix.trimmingWhitespace()
        guard (1...50).contains(prefix.count) else { throw RPCError.invalidArgument("prefix: 1-50 characters") }
        guard (1...200).contains(request.limit) else { throw RPCError.invalidArgument("limit: 1-200") }
        let found = try await store.search(prefix: prefix, after: request.afterUsername.lowercased(), limit: Int(request.limit) + 1)
        return AccountsV1.SearchUsersResponse(profiles: found.prefix(Int(request.limit)).map(\.profile), more: found.count > Int(request.limit))
    }

    public func findUsers(_ request: AccountsV1.FindUsersRequest, _ context: RequestContext) async throws -> AccountsV1.FindUsersResponse {
        guard request.usernames.count <= 500 else { throw RPCError.invalidArgument("usernames: at most 500") }
        let names = Array(Set(request.usernames.map { $0.trimmingWhitespace().lowercased() }))
        return AccountsV1.FindUsersResponse(profiles: try await store.users(usernames: names).map(\.profile))
    }

    // MARK: Contact matching

    public func linkExternalId(_ request: AccountsV1.LinkExternalIdRequest, _ context: RequestContext) async throws -> AccountsV1.LinkExternalIdResponse {
        let caller = try context.requireCaller()
        let link = try Self.externalID(request.externalId)
        let linked = try await store.link(userID: caller, link, now: config.now())
        return AccountsV1.LinkExternalIdResponse(linked: linked.map(\.proto))
    }

    public func unlinkExternalId(_ request: AccountsV1.UnlinkExternalIdRequest, _ context: RequestContext) async throws -> AccountsV1.UnlinkExternalIdResponse {
        let caller = try context.requireCaller()
        let link = try Self.externalID(request.externalId)
        let linked = try await store.unlink(userID: caller, link)
        return AccountsV1.UnlinkExternalIdResponse(linked: linked.map(\.proto))
    }

    private static func externalID(_ value: AccountsV1.ExternalId?) throws -> ExternalID {
        guard let value else { throw RPCError.invalidArgument("external_id: required") }
        let (provider, id) = try ContactIdentifier.externalID(provider: value.provider, id: value.externalId)
        return ExternalID(provider: provider, id: id)
    }

    public func matchContacts(_ request: AccountsV1.MatchContactsRequest, _ context: RequestContext) async throws -> AccountsV1.MatchContactsResponse {
        guard request.hashes.count <= 5_000, request.externalIds.count <= 5_000 else {
            throw RPCError.invalidArgument("at most 5,000 hashes and 5,000 external ids")
        }
        if let bad = request.hashes.firstIndex(where: { $0.count != ContactIdentifier.hashLength }) {
            throw RPCError.invalidArgument("hashes[\(bad)]: a SHA-256 hash is 32 bytes")
        }
        let links = try request.externalIds.map(Self.externalID)
        let matches = try await store.matchContacts(hashes: Array(Set(request.hashes)), externalIDs: Array(Set(links)))
        return AccountsV1.MatchContactsResponse(matches: matches.map {
            AccountsV1.ContactMatch(profile: $0.user.profile, byPhone: $0.phone, byEmail: $0.email, byExternalId: $0.external)
        })
    }
}

/// Every rpc of the contract has its handler above (or the build fails): see `MethodRouter.register(all:)`.
extension AccountsService: FriensoService, AccountsV1.AccountsService.Handler {}
