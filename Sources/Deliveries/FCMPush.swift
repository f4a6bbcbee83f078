import ServiceKit
public import Alerts
import Foundation
import FriensoProto
import JWTKit
public import Logging

/// Push through Firebase Cloud Messaging's HTTP v1 API: `POST
/// /v1/projects/{project_id}/messages:send` with `Authorization: Bearer <access token>`, one
/// message per device token. The access token comes from Google's OAuth 2.0 server for service
/// accounts: a JWT signed with the service account's RSA key (RS256; `iss` the account's email,
/// `scope` firebase.messaging, `aud` its `token_uri`, an hour's lifetime) exchanged at
/// `token_uri` (`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`), and kept until a
/// minute before it expires (`OAuthTokens`).
///
/// FCM's errors (`error.details[].errorCode`): UNREGISTERED (404) and SENDER_ID_MISMATCH (403)
/// mean the token is dead: the delivery fails and the device is unregistered. QUOTA_EXCEEDED
/// (429), UNAVAILABLE (503) and INTERNAL (500) are tried again at `Retry-After` when given.
/// UNAUTHENTICATED (401) drops the cached access token and is tried again. INVALID_ARGUMENT and
/// other 4xx are final.
public struct FCMPush: PushProvider {
    /// The service account's key file, as the Firebase console downloads it.
    public struct ServiceAccount: Decodable, Sendable {
        public var projectID: String
        public var clientEmail: String
        public var privateKey: String
        public var privateKeyID: String?
        public var tokenURI: String

        enum CodingKeys: String, CodingKey {
            case projectID = "project_id", clientEmail = "client_email", privateKey = "private_key", privateKeyID = "private_key_id"
            case tokenURI = "token_uri"
        }
    }

    public struct Options: Sendable {
        public var account: ServiceAccount
        /// `https://fcm.googleapis.com` unless pointed elsewhere (a test server).
        public var baseURL: String

        public init(account: ServiceAccount, baseURL: String = "https://fcm.googleapis.com") {
            self.account = account
            self.baseURL = baseURL
        }
    }

    public let name = "fcm"
    let options: Options
    let http: ProviderHTTP
    let tokens: CachedToken

    public init(_ options: Options, http: ProviderHTTP, logger: Logger) throws {
        guard !options.account.projectID.isEmpty, !options.account.clientEmail.isEmpty else {
            throw ProviderConfigError("fcm: the service account file has no project_id or client_email")
        }
        guard URL(string: options.account.tokenURI)?.scheme != nil else { throw ProviderConfigError("fcm: the service account's token_uri is not a URL") }
        let key: Insecure.RSA.PrivateKey
        do { key = try Insecure.RSA.PrivateKey(pem: options.account.privateKey) } catch {
            throw ProviderConfigError("fcm: the service account's private_key is not an RSA key in PEM (\(error))")
        }
        self.options = options
        self.http = http
        tokens = OAuthTokens.cache(account: options.account, key: key, http: http, logger: logger)
    }

    public func send(_ batch: [OutgoingMessage]) async -> [DeliveryResult] {
        await concurrently(batch, width: 16) { await self.sendOne($0) }
    }

    var url: String {
        "\(options.baseURL.trimmingSuffix("/"))/v1/projects/\(FormEncoding.escape(options.account.projectID))/messages:send"
    }

    /// The v1 message: the notification for every platform, Android's and APNs' own priority
    /// fields, and what the app needs to open the right screen. A retried delivery carries the
    /// same `tag` (Android) and `apns-collapse-id` (iOS through FCM): if both copies arrive, the
    /// second replaces the first on the device.
    static func message(_ m: OutgoingMessage) -> [String: Any] {
        [
            "message": [
                "token": m.address,
                "notification": ["title": "Frienso", "body": m.body],
                "data": ["delivery": m.idempotencyKey, "source": m.source],
                "android": ["priority": m.isUrgent ? "HIGH" : "NORMAL", "ttl": "86400s",
                            "notification": ["tag": m.idempotencyKey]] as [String: Any],
                "apns": ["headers": ["apns-priority": m.isUrgent ? "10" : "5", "apns-collapse-id": m.idempotencyKey],
                         "payload": ["aps": ["sound": "default", "interruption-level": m.isUrgent ? "time-sensitive" : "active"]]] as [String: Any],
            ] as [String: Any],
        ]
    }

    func sendOne(_ message: OutgoingMessage) async -> DeliveryResult {
        let token: String
        do { token = try await tokens.get() } catch {
            return .failed("fcm: no access token: \(error)", retryable: true)
        }
        let body = (try? JSONSerialization.data(withJSONObject: Self.message(message), options: [.sortedKeys])).map(Array.init) ?? []
        let answer = await http.send(.POST, url, headers: [
            ("Authorization", "Bearer \(token)"), ("Content-Type", "application/json; charset=UTF-8"), ("Accept", "application/json"),
        ], body: body)
        let result = Self.classify(answer)
        if case .answered(401, _, _) = answer { await tokens.invalidate(token) }
        return result
    }

    static func classify(_ answer: ProviderAnswer) -> DeliveryResult {
        guard case .answered(let status, _, _) = answer else { return HTTPOutcome.generic(answer, provider: "fcm") }
        let json = answer.json
        if status == 200, let name = json?["name"] as? String, !name.isEmpty { return .delivered(reference: name) }
        let error = json?["error"] as? [String: Any]
        let details = error?["details"] as? [[String: Any]] ?? []
        let code = details.compactMap { $0["errorCode"] as? String }.first ?? (error?["status"] as? String) ?? ""
        let detail = "fcm \(code.isEmpty ? "\(status)" : code): \((error?["message"] as? String) ?? answer.excerpt)"
        switch code {
        case "UNREGISTERED", "SENDER_ID_MISMATCH":
            return .deadAddress(detail)
        case "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR":
            return .failed(detail, retryable: true)
        default:
            return HTTPOutcome.generic(answer, provider: "fcm", detail: detail)
        }
    }
}

/// OAuth 2.0 access tokens for a Google service account: a JWT signed with its key exchanged at
/// its `token_uri`, kept (`CachedToken`) until a minute before it expires.
enum OAuthTokens {
    struct Assertion: JWTPayload {
        var iss: String
        var scope: String
        var aud: String
        var iat: Int
        var exp: Int
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    static let scope = "https://www.googleapis.com/auth/firebase.messaging"

    static func cache(account: FCMPush.ServiceAccount, key: Insecure.RSA.PrivateKey, http: ProviderHTTP, logger: Logger) -> CachedToken {
        CachedToken { try await exchange(account: account, key: key, http: http, logger: logger) }
    }

    static func exchange(account: FCMPush.ServiceAccount, key: Insecure.RSA.PrivateKey, http: ProviderHTTP,
                         logger: Logger) async throws -> CachedToken.Made {
        let kid = account.privateKeyID.map { JWKIdentifier(string: $0) }
        let keys = await JWTKeyCollection().add(rsa: key, digestAlgorithm: .sha256, kid: kid)
        let now = Int(Date().timeIntervalSince1970)
        let assertion = try await keys.sign(Assertion(iss: account.clientEmail, scope: scope, aud: account.tokenURI, iat: now, exp: now + 3600), kid: kid)
        let answer = await http.send(.POST, account.tokenURI, headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json")],
                                     body: FormEncoding.encode([("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"), ("assertion", assertion)]))
        guard case .answered(200, _, _) = answer, let json = answer.json, let token = json["access_token"] as? String, !token.isEmpty else {
            let why: String = switch answer {
            case .unreachable(let e): e
            case .answered(let status, _, _): "\(status): \(answer.excerpt)"
            }
            logger.error("fcm: the OAuth token exchange failed", metadata: ["answer": "\(why)"])
            throw ProviderConfigError("the token exchange at \(account.tokenURI) failed: \(why)")
        }
        let lifetime = (json["expires_in"] as? Int) ?? 3600
        return (token, Date().addingTimeInterval(TimeInterval(max(0, lifetime - 60))))
    }
}
