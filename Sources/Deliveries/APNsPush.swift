import ServiceKit
public import Alerts
import Foundation
import FriensoProto
import JWTKit
public import Logging

/// Push to iOS devices through Apple's APNs provider API: `POST /3/device/<token>` over HTTP/2
/// (the client negotiates it by ALPN; APNs speaks nothing else), token-based authentication: an
/// ES256 JWT (header `kid` the key's id, claims `iss` the team id and `iat`) signed with the
/// `.p8` key, made again every 50 minutes (APNs refuses one older than an hour and one made
/// more often than every 20 minutes). Headers: `apns-topic` (the app's bundle id),
/// `apns-push-type: alert`, `apns-priority` 10 for alerts a person may be in danger behind
/// (helpNow, a missed timer, a watch) and 5 otherwise, `apns-expiration` a day ahead (a phone
/// that is off gets it when it comes back), `apns-id` derived from the delivery (APNs echoes it)
/// and `apns-collapse-id` the delivery's key (a retried copy replaces the first on the phone).
///
/// APNs' reasons: 410 Unregistered, 400 BadDeviceToken and DeviceTokenNotForTopic mean the token
/// is dead: failed, device unregistered. 403 ExpiredProviderToken / InvalidProviderToken: a new
/// JWT is made, tried again. 429 TooManyRequests and 5xx: tried again (`Retry-After` if given).
/// Other 4xx (PayloadTooLarge, BadTopic, …) are final.
public struct APNsPush: PushProvider {
    public struct Options: Sendable {
        /// The `.p8` key's PEM text (PKCS#8, P-256).
        public var key: String
        public var keyID: String
        public var teamID: String
        /// The app's bundle id.
        public var topic: String
        /// `https://api.push.apple.com` (production), `https://api.sandbox.push.apple.com`
        /// (development builds), or a test server.
        public var baseURL: String

        public static let production = "https://api.push.apple.com", sandbox = "https://api.sandbox.push.apple.com"

        public init(key: String, keyID: String, teamID: String, topic: String, baseURL: String = Options.production) {
            self.key = key
            self.keyID = keyID
            self.teamID = teamID
            self.topic = topic
            self.baseURL = baseURL
        }
    }

    public let name = "apns"
    let options: Options
    let http: ProviderHTTP
    let tokens: CachedToken
    /// APNs refuses a payload over 4 KiB; the body is cut to fit well within it.
    static let maxBody = 2_000

    public init(_ options: Options, http: ProviderHTTP, logger: Logger) throws {
        guard options.keyID.count == 10, options.teamID.count == 10 else {
            throw ProviderConfigError("apns: keyId and teamId are the 10-character ids Apple's developer account shows")
        }
        guard !options.topic.isEmpty else { throw ProviderConfigError("apns: topic (the app's bundle id) is required") }
        let key: ES256PrivateKey
        do { key = try ES256PrivateKey(pem: options.key) } catch {
            throw ProviderConfigError("apns: the key file is not a P-256 private key in PEM (.p8) (\(error))")
        }
        self.options = options
        self.http = http
        tokens = ProviderTokens.cache(key: key, keyID: options.keyID, teamID: options.teamID)
    }

    public func send(_ batch: [OutgoingMessage]) async -> [DeliveryResult] {
        // One HTTP/2 connection carries them all as concurrent streams.
        await concurrently(batch, width: 32) { await self.sendOne($0) }
    }

    /// A UUID made from the delivery id (APNs wants its `apns-id` in that form): the same on
    /// every retry, and readable back to the delivery.
    static func apnsID(_ m: OutgoingMessage) -> String {
        let hex = String(m.deliveryID, radix: 16)
        let tail = String(repeating: "0", count: max(0, 12 - hex.count)) + hex
        return "00000000-0000-4000-8000-\(tail.suffix(12))"
    }

    static func payload(_ m: OutgoingMessage) -> [String: Any] {
        let body = m.body.count > maxBody ? String(m.body.prefix(maxBody - 1)) + "…" : m.body
        return [
            "aps": ["alert": ["title": "Frienso", "body": body], "sound": "default",
                    "interruption-level": m.isUrgent ? "time-sensitive" : "active"] as [String: Any],
            "frienso": ["delivery": m.idempotencyKey, "source": m.source],
        ]
    }

    func sendOne(_ message: OutgoingMessage) async -> DeliveryResult {
        let jwt: String
        do { jwt = try await tokens.get() } catch {
            return .failed("apns: could not sign the provider token: \(error)", retryable: true)
        }
        let body = (try? JSONSerialization.data(withJSONObject: Self.payload(message), options: [.sortedKeys])).map(Array.init) ?? []
        let url = "\(options.baseURL.trimmingSuffix("/"))/3/device/\(FormEncoding.escape(message.address))"
        let answer = await http.send(.POST, url, headers: [
            ("authorization", "bearer \(jwt)"),
            ("apns-topic", options.topic),
            ("apns-push-type", "alert"),
            ("apns-priority", message.isUrgent ? "10" : "5"),
            ("apns-expiration", "\(Int(Date().timeIntervalSince1970) + 86_400)"),
            ("apns-id", Self.apnsID(message)),
            ("apns-collapse-id", String(message.idempotencyKey.prefix(64))),
            ("content-type", "application/json"),
        ], body: body)
        let result = Self.classify(answer)
        if case .answered(403, _, _) = answer, (answer.json?["reason"] as? String)?.hasSuffix("ProviderToken") == true {
            await tokens.invalidate(jwt)
        }
        return result
    }

    static func classify(_ answer: ProviderAnswer) -> DeliveryResult {
        guard case .answered(let status, let headers, _) = answer else { return HTTPOutcome.generic(answer, provider: "apns") }
        if status == 200 { return .delivered(reference: headers.first(name: "apns-id") ?? "") }
        let reason = answer.json?["reason"] as? String ?? ""
        let detail = "apns \(status) \(reason.isEmpty ? answer.excerpt : reason)"
        switch (status, reason) {
        case (410, _), (400, "BadDeviceToken"), (400, "DeviceTokenNotForTopic"):
            return .deadAddress(detail)
        case (403, "ExpiredProviderToken"), (403, "InvalidProviderToken"):
            return .failed(detail, retryable: true)
        default:
            return HTTPOutcome.generic(answer, provider: "apns", detail: detail)
        }
    }
}

/// APNs' provider tokens: one ES256 JWT, made again when it is 50 minutes old or when APNs says
/// it expired (not more often otherwise: APNs answers TooManyProviderTokenUpdates), kept by a
/// `CachedToken`.
enum ProviderTokens {
    struct Claims: JWTPayload {
        var iss: String
        var iat: Int
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    static let lifetime: TimeInterval = 50 * 60

    static func cache(key: ES256PrivateKey, keyID: String, teamID: String) -> CachedToken {
        CachedToken {
            let kid = JWKIdentifier(string: keyID)
            let keys = await JWTKeyCollection().add(ecdsa: key, kid: kid)
            let now = Date()
            return (try await keys.sign(Claims(iss: teamID, iat: Int(now.timeIntervalSince1970)), kid: kid), now.addingTimeInterval(lifetime))
        }
    }
}
