import Crypto
import CryptoExtras
import Foundation
import Synchronization

/// Fake Twilio, FCM (with Google's OAuth token endpoint), APNs and a JSON webhook: each checks
/// every request as the provider's public documentation specifies (path, headers, credentials,
/// body fields, JWT claims and signature) and answers as the provider does. What a check finds
/// wrong is kept in `problems` (and answered with the provider's error for a bad request), so a
/// test asserts `problems.isEmpty`. `script` queues answers for the next requests (a 429, a
/// dead token) before the normal ones.
public final class FakeProviderState: Sendable {
    struct State {
        var scripted: [FakeResponse] = []
        var scriptedFor: [String: [FakeResponse]] = [:]
        var problems: [String] = []
        /// Accepted messages: (address, text, the id answered).
        var accepted: [(address: String, text: String, id: String)] = []
        var counter = 0
    }
    let state = Mutex(State())

    public init() {}

    /// The next requests get these answers, in order, whatever they are (after the checks).
    public func script(_ responses: FakeResponse...) {
        state.withLock { $0.scripted += responses }
    }

    /// The next requests for `address` (a phone number, a device token) get these answers.
    public func script(for address: String, _ responses: FakeResponse...) {
        state.withLock { $0.scriptedFor[address, default: []] += responses }
    }

    public var problems: [String] { state.withLock { $0.problems } }
    public var accepted: [(address: String, text: String, id: String)] { state.withLock { $0.accepted } }

    func problem(_ text: String) {
        state.withLock { $0.problems.append(text) }
    }

    func nextScripted(for address: String = "") -> FakeResponse? {
        state.withLock { s in
            if var queue = s.scriptedFor[address], !queue.isEmpty {
                let first = queue.removeFirst()
                s.scriptedFor[address] = queue
                return first
            }
            return s.scripted.isEmpty ? nil : s.scripted.removeFirst()
        }
    }

    func accept(_ address: String, _ text: String, id: (Int) -> String) -> String {
        state.withLock { s in
            s.counter += 1
            let made = id(s.counter)
            s.accepted.append((address, text, made))
            return made
        }
    }

    func next() -> Int { state.withLock { s in s.counter += 1; return s.counter } }
}

enum JWTCheck {
    static func base64URL(_ text: Substring) -> Data? {
        var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while s.count % 4 != 0 { s += "=" }
        return Data(base64Encoded: s)
    }

    /// The token's header and claims when its signature verifies with `verify`; else why not.
    static func open(_ token: String, verify: (Data, Data) -> Bool) -> Result<(header: [String: Any], claims: [String: Any]), FakeServerError> {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let h = base64URL(parts[0]), let c = base64URL(parts[1]), let sig = base64URL(parts[2]),
              let header = (try? JSONSerialization.jsonObject(with: h)) as? [String: Any],
              let claims = (try? JSONSerialization.jsonObject(with: c)) as? [String: Any] else {
            return .failure(FakeServerError("not a JWS compact token"))
        }
        guard verify(Data("\(parts[0]).\(parts[1])".utf8), sig) else { return .failure(FakeServerError("the signature does not verify")) }
        return .success((header, claims))
    }
}

// MARK: - Twilio

/// Twilio's Messages resource: `POST /2010-04-01/Accounts/{AccountSid}/Messages.json`, HTTP basic
/// auth (account SID : auth token), form fields `To` (E.164), `Body` (1-1600 characters) and
/// exactly one of `From` / `MessagingServiceSid`; 201 with the message resource (`sid` "SM" + 32
/// hex digits, `status` "queued").
public final class FakeTwilio: FakeProvider {
    public let server: FakeProviderServer
    public let checks = FakeProviderState()
    public let accountSID = "AC" + String(repeating: "a1", count: 16)
    public let authToken = "test-auth-token-\(UInt32.random(in: 0...UInt32.max))"

    public static func start(ca: TestCA) async throws -> FakeTwilio {
        try await FakeProviderServer.serving(ca: ca, .http1) { FakeTwilio(server: $0) }
    }

    fileprivate init(server: FakeProviderServer) { self.server = server }

    func respond(_ r: RecordedRequest) -> FakeResponse {
        let error = { (status: Int, code: Int, message: String) -> FakeResponse in
            self.checks.problem(message)
            return FakeResponse(status: status, json: ["code": code, "message": message, "status": status,
                                                       "more_info": "https://www.twilio.com/docs/errors/\(code)"])
        }
        guard r.method == "POST", r.path == "/2010-04-01/Accounts/\(accountSID)/Messages.json" else {
            return error(404, 20404, "unexpected \(r.method) \(r.path)")
        }
        let expected = "Basic " + Data("\(accountSID):\(authToken)".utf8).base64EncodedString()
        guard r.header("authorization") == expected else { return error(401, 20003, "authentication: \(r.header("authorization") ?? "none")") }
        guard r.header("content-type")?.hasPrefix("application/x-www-form-urlencoded") == true else {
            return error(400, 20001, "content-type \(r.header("content-type") ?? "none")")
        }
        let form = r.form
        guard let to = form["To"], to.range(of: #"^\+[1-9][0-9]{1,14}$"#, options: .regularExpression) != nil else {
            return error(400, 21211, "The 'To' number \(form["To"] ?? "") is not a valid phone number.")
        }
        guard let body = form["Body"], (1...1600).contains(body.count) else { return error(400, 21602, "Message body is required (1-1600).") }
        guard (form["From"] != nil) != (form["MessagingServiceSid"] != nil) else {
            return error(400, 21603, "exactly one of From and MessagingServiceSid is required")
        }
        if let scripted = checks.nextScripted(for: to) { return scripted }
        let sid = checks.accept(to, body) { "SM" + String(format: "%032x", $0) }
        return FakeResponse(status: 201, json: ["sid": sid, "status": "queued", "to": to, "body": body, "account_sid": accountSID])
    }

    /// Twilio's 429 (error 20429), with `Retry-After`.
    public static func tooManyRequests(retryAfter seconds: Int) -> FakeResponse {
        FakeResponse(status: 429, headers: [("Retry-After", "\(seconds)")], json: ["code": 20429, "message": "Too Many Requests", "status": 429])
    }
}

// MARK: - FCM and Google's OAuth 2.0 token endpoint

/// Google's token endpoint for service accounts (`POST <token_uri>`, form `grant_type` =
/// urn:ietf:params:oauth:grant-type:jwt-bearer and `assertion`, a JWT signed RS256 with the
/// account's key: `iss` its email, `scope`, `aud` the token URI, `iat` now and `exp` at most an
/// hour later) and FCM's HTTP v1 `POST /v1/projects/{project}/messages:send` (Bearer access
/// token; a `message` with exactly one target, here `token`; `notification` title and body).
public final class FakeFCM: FakeProvider {
    public let server: FakeProviderServer
    public let checks = FakeProviderState()
    public let projectID = "frienso-test"
    public let clientEmail = "alerts@frienso-test.iam.gserviceaccount.com"
    public let privateKeyPEM: String
    let publicKey: _RSA.Signing.PublicKey
    private let issued = Mutex<Set<String>>([])
    /// Token exchanges so far.
    public var exchanges: Int { exchangeCount.load(ordering: .relaxed) }
    private let exchangeCount = Atomic<Int>(0)

    public static func start(ca: TestCA, keyDirectory: String) async throws -> FakeFCM {
        let (privatePEM, publicPEM) = try await OpenSSL.key("RSA", in: keyDirectory, name: "fcm-service-account")
        let publicKey = try _RSA.Signing.PublicKey(pemRepresentation: publicPEM)
        return try await FakeProviderServer.serving(ca: ca, .http1) { FakeFCM(server: $0, privateKeyPEM: privatePEM, publicKey: publicKey) }
    }

    fileprivate init(server: FakeProviderServer, privateKeyPEM: String, publicKey: _RSA.Signing.PublicKey) {
        self.server = server
        self.privateKeyPEM = privateKeyPEM
        self.publicKey = publicKey
    }

    public var tokenURI: String { "\(server.baseURL)/token" }

    /// The service account key file, as the Firebase console makes it.
    public func serviceAccountJSON() throws -> String {
        let object: [String: Any] = ["type": "service_account", "project_id": projectID, "private_key_id": "kid-test-1",
                                     "private_key": privateKeyPEM, "client_email": clientEmail, "client_id": "1",
                                     "token_uri": tokenURI]
        return String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self)
    }

    private let revoked = Atomic<Bool>(false)

    /// Forgets every access token issued (as if they expired early): FCM answers 401 to them.
    public func revokeTokens() {
        revoked.store(true, ordering: .relaxed)
        issued.withLock { $0 = [] }
    }

    func respond(_ r: RecordedRequest) -> FakeResponse {
        if r.path == "/token" { return token(r) }
        return send(r)
    }

    private func token(_ r: RecordedRequest) -> FakeResponse {
        let bad = { (why: String) -> FakeResponse in
            self.checks.problem("token endpoint: \(why)")
            return FakeResponse(status: 400, json: ["error": "invalid_grant", "error_description": why])
        }
        guard r.method == "POST", r.header("content-type")?.hasPrefix("application/x-www-form-urlencoded") == true else { return bad("not a form POST") }
        let form = r.form
        guard form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer" else { return bad("grant_type \(form["grant_type"] ?? "")") }
        let opened = JWTCheck.open(form["assertion"] ?? "") { data, sig in
            publicKey.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: sig), for: SHA256.hash(data: data), padding: .insecurePKCS1v1_5)
        }
        guard case .success(let (header, claims)) = opened else {
            if case .failure(let e) = opened { return bad("assertion: \(e)") }
            return bad("assertion")
        }
        let now = Int(Date().timeIntervalSince1970)
        guard header["alg"] as? String == "RS256" else { return bad("alg \(header["alg"] ?? "")") }
        guard header["kid"] as? String == "kid-test-1" else { return bad("kid \(header["kid"] ?? "none")") }
        guard claims["iss"] as? String == clientEmail else { return bad("iss") }
        guard claims["scope"] as? String == "https://www.googleapis.com/auth/firebase.messaging" else { return bad("scope \(claims["scope"] ?? "")") }
        guard claims["aud"] as? String == tokenURI else { return bad("aud \(claims["aud"] ?? "")") }
        guard let iat = claims["iat"] as? Int, let exp = claims["exp"] as? Int, abs(iat - now) <= 60, exp > iat, exp - iat <= 3600 else {
            return bad("iat/exp \(claims["iat"] ?? "") \(claims["exp"] ?? "")")
        }
        if let scripted = checks.nextScripted() { return scripted }
        let token = "ya29.test-\(checks.next())"
        issued.withLock { _ = $0.insert(token) }
        exchangeCount.add(1, ordering: .relaxed)
        return FakeResponse(status: 200, json: ["access_token": token, "expires_in": 3599, "token_type": "Bearer"])
    }

    private func send(_ r: RecordedRequest) -> FakeResponse {
        let error = { (status: Int, code: String, why: String, record: Bool) -> FakeResponse in
            if record { self.checks.problem("send: \(why)") }
            return FakeResponse(status: status, json: ["error": ["code": status, "message": why, "status": code]])
        }
        guard r.method == "POST", r.path == "/v1/projects/\(projectID)/messages:send" else { return error(404, "NOT_FOUND", "\(r.method) \(r.path)", true) }
        guard let auth = r.header("authorization"), auth.hasPrefix("Bearer "), issued.withLock({ $0.contains(String(auth.dropFirst(7))) }) else {
            // An expired token is not the client's mistake: FCM says UNAUTHENTICATED.
            return error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.", !revoked.load(ordering: .relaxed))
        }
        guard r.header("content-type")?.hasPrefix("application/json") == true else { return error(400, "INVALID_ARGUMENT", "content-type", true) }
        guard let message = r.json?["message"] as? [String: Any] else { return error(400, "INVALID_ARGUMENT", "no message", true) }
        let targets = ["token", "topic", "condition"].filter { message[$0] != nil }
        guard targets == ["token"], let token = message["token"] as? String, !token.isEmpty else {
            return error(400, "INVALID_ARGUMENT", "exactly one target (token) is required: \(targets)", true)
        }
        guard let notification = message["notification"] as? [String: Any], let body = notification["body"] as? String,
              notification["title"] is String else { return error(400, "INVALID_ARGUMENT", "notification title and body", true) }
        if let android = message["android"] as? [String: Any], let priority = android["priority"] as? String, !["NORMAL", "HIGH"].contains(priority) {
            return error(400, "INVALID_ARGUMENT", "android.priority \(priority)", true)
        }
        if let scripted = checks.nextScripted(for: token) { return scripted }
        let name = checks.accept(token, body) { "projects/\(projectID)/messages/\($0)" }
        return FakeResponse(status: 200, json: ["name": name])
    }

    /// FCM's answer for a token that is no longer registered.
    public static func unregistered() -> FakeResponse {
        FakeResponse(status: 404, json: ["error": ["code": 404, "message": "Requested entity was not found.", "status": "NOT_FOUND",
                                                   "details": [["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": "UNREGISTERED"]]]])
    }

    public static func quotaExceeded(retryAfter seconds: Int) -> FakeResponse {
        FakeResponse(status: 429, headers: [("Retry-After", "\(seconds)")],
                     json: ["error": ["code": 429, "message": "Quota exceeded.", "status": "RESOURCE_EXHAUSTED",
                                      "details": [["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": "QUOTA_EXCEEDED"]]]])
    }
}

// MARK: - APNs

/// Apple's APNs provider API: HTTP/2 only; `POST /3/device/<token>`; `authorization: bearer
/// <JWT>` signed ES256 (header `alg` ES256 and `kid` the key id; claims `iss` the team id and
/// `iat` within the last hour); `apns-topic` the bundle id; `apns-push-type` alert;
/// `apns-priority` 10 or 5; `apns-expiration` a UNIX time; `apns-id` a UUID; `apns-collapse-id`
/// at most 64 bytes; a JSON payload with `aps`, at most 4 KiB. 200 with the `apns-id`.
public final class FakeAPNs: FakeProvider {
    public let server: FakeProviderServer
    public let checks = FakeProviderState()
    public let keyID = "ABC123DEFG", teamID = "TEAM123456", topic = "app.frienso.ios"
    public let keyPEM: String
    let publicKey: P256.Signing.PublicKey
    private let tokensSeen = Mutex<Set<String>>([])
    /// Distinct provider tokens (JWTs) used so far.
    public var providerTokens: Int { tokensSeen.withLock { $0.count } }
    /// The priority each accepted push came with, by device token.
    private let priorities = Mutex<[String: [String]]>([:])
    public func priorities(of device: String) -> [String] { priorities.withLock { $0[device] ?? [] } }

    public static func start(ca: TestCA, keyDirectory: String) async throws -> FakeAPNs {
        let (privatePEM, publicPEM) = try await OpenSSL.key("EC", in: keyDirectory, name: "apns-key")
        let publicKey = try P256.Signing.PublicKey(pemRepresentation: publicPEM)
        return try await FakeProviderServer.serving(ca: ca, .http2) { FakeAPNs(server: $0, keyPEM: privatePEM, publicKey: publicKey) }
    }

    fileprivate init(server: FakeProviderServer, keyPEM: String, publicKey: P256.Signing.PublicKey) {
        self.server = server
        self.keyPEM = keyPEM
        self.publicKey = publicKey
    }

    func respond(_ r: RecordedRequest) -> FakeResponse {
        let refuse = { (status: Int, reason: String, why: String) -> FakeResponse in
            self.checks.problem("\(reason): \(why)")
            return FakeResponse(status: status, json: ["reason": reason])
        }
        guard r.version == "HTTP/2" else { return refuse(400, "BadRequest", "not HTTP/2") }
        guard r.method == "POST", r.path.hasPrefix("/3/device/") else { return refuse(405, "MethodNotAllowed", "\(r.method) \(r.path)") }
        let device = String(r.path.dropFirst("/3/device/".count))
        guard let auth = r.header("authorization"), auth.hasPrefix("bearer ") else { return refuse(403, "MissingProviderToken", "no bearer") }
        let jwt = String(auth.dropFirst(7))
        let opened = JWTCheck.open(jwt) { data, sig in
            (try? P256.Signing.ECDSASignature(rawRepresentation: sig)).map { publicKey.isValidSignature($0, for: data) } ?? false
        }
        guard case .success(let (header, claims)) = opened else { return refuse(403, "InvalidProviderToken", "\(opened)") }
        let now = Int(Date().timeIntervalSince1970)
        guard header["alg"] as? String == "ES256", header["kid"] as? String == keyID else { return refuse(403, "InvalidProviderToken", "header \(header)") }
        guard claims["iss"] as? String == teamID, let iat = claims["iat"] as? Int, iat <= now + 60, now - iat < 3600 else {
            return refuse(403, "InvalidProviderToken", "claims \(claims)")
        }
        tokensSeen.withLock { _ = $0.insert(jwt) }
        guard r.header("apns-topic") == topic else { return refuse(400, "BadTopic", r.header("apns-topic") ?? "none") }
        guard r.header("apns-push-type") == "alert" else { return refuse(400, "InvalidPushType", r.header("apns-push-type") ?? "none") }
        guard let priority = r.header("apns-priority"), ["5", "10"].contains(priority) else { return refuse(400, "BadPriority", r.header("apns-priority") ?? "none") }
        guard let expiration = r.header("apns-expiration"), Int(expiration) != nil else { return refuse(400, "BadExpirationDate", "none") }
        let id = r.header("apns-id") ?? UUID().uuidString.lowercased()
        guard UUID(uuidString: id) != nil else { return refuse(400, "BadMessageId", id) }
        if let collapse = r.header("apns-collapse-id"), collapse.utf8.count > 64 { return refuse(400, "BadCollapseId", collapse) }
        guard r.body.count <= 4096 else { return refuse(413, "PayloadTooLarge", "\(r.body.count) bytes") }
        guard let aps = r.json?["aps"] as? [String: Any], let alert = aps["alert"] as? [String: Any], let body = alert["body"] as? String else {
            return refuse(400, "PayloadEmpty", r.text)
        }
        if let scripted = checks.nextScripted(for: device) { return scripted }
        _ = checks.accept(device, body) { _ in id }
        priorities.withLock { $0[device, default: []].append(priority) }
        return FakeResponse(status: 200, headers: [("apns-id", id)])
    }

    public static func unregistered() -> FakeResponse {
        FakeResponse(status: 410, json: ["reason": "Unregistered", "timestamp": Int(Date().timeIntervalSince1970 * 1000)])
    }

    public static func expiredProviderToken() -> FakeResponse {
        FakeResponse(status: 403, json: ["reason": "ExpiredProviderToken"])
    }
}

// MARK: - A JSON webhook

/// Frienso's generic SMS webhook, as `docs/operations.md` specifies it: `POST` JSON `{id,
/// channel, to, body, urgent}` with `Idempotency-Key` equal to `id` and, when configured,
/// `Authorization: Bearer <token>`.
public final class FakeWebhook: FakeProvider {
    public let server: FakeProviderServer
    public let checks = FakeProviderState()
    public let bearerToken = "webhook-secret-\(UInt32.random(in: 0...UInt32.max))"

    public static func start(ca: TestCA) async throws -> FakeWebhook {
        try await FakeProviderServer.serving(ca: ca, .http1) { FakeWebhook(server: $0) }
    }

    fileprivate init(server: FakeProviderServer) { self.server = server }

    public var url: String { "\(server.baseURL)/hooks/sms" }

    func respond(_ r: RecordedRequest) -> FakeResponse {
        let bad = { (status: Int, why: String) -> FakeResponse in
            self.checks.problem(why)
            return FakeResponse(status: status, json: ["error": why])
        }
        guard r.method == "POST", r.path == "/hooks/sms" else { return bad(404, "\(r.method) \(r.path)") }
        guard r.header("authorization") == "Bearer \(bearerToken)" else { return bad(401, "authorization") }
        guard r.header("content-type")?.hasPrefix("application/json") == true, let json = r.json else { return bad(415, "not JSON") }
        guard let id = json["id"] as? String, r.header("idempotency-key") == id, json["channel"] as? String == "sms",
              let to = json["to"] as? String, let body = json["body"] as? String, json["urgent"] is Bool else {
            return bad(422, "fields: \(r.text)")
        }
        if let scripted = checks.nextScripted(for: to) { return scripted }
        _ = checks.accept(to, body) { _ in id }
        return FakeResponse(status: 202, json: ["id": "hook-\(id)"])
    }
}

/// A fake provider: answers each request its server receives.
protocol FakeProvider: Sendable {
    func respond(_ request: RecordedRequest) -> FakeResponse
}

extension FakeProviderServer {
    /// Starts a server answered by the fake `make` builds around it.
    static func serving<F: FakeProvider>(ca: TestCA, _ kind: HTTPKind, _ make: (FakeProviderServer) throws -> F) async throws -> F {
        let box = Box<F>()
        let server = try await start(ca: ca, protocol: kind) { request in box.value?.respond(request) ?? FakeResponse(status: 503) }
        let fake = try make(server)
        box.value = fake
        return fake
    }
}

final class Box<T: Sendable>: @unchecked Sendable {
    private let lock = Mutex<T?>(nil)
    var value: T? {
        get { lock.withLock { $0 } }
        set { lock.withLock { $0 = newValue } }
    }
}
