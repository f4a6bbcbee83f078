import ServiceKit
public import Alerts
import Foundation
import Logging

/// Any other SMS gateway, through a JSON webhook the operator points at it: one `POST` per
/// message with
///
/// ```json
/// {"id": "frienso-delivery-42", "channel": "sms", "to": "+15551234567", "body": "…", "urgent": true}
/// ```
///
/// and the headers `Content-Type: application/json`, `Idempotency-Key: <id>` (the same on every
/// retry of a delivery, so a gateway that keeps keys sends it once) and, when a token file is
/// configured, `Authorization: Bearer <token>`. A 2xx is delivered (the answer's `"id"`, when it
/// is a JSON object with one, is the reference); 408, 429 and 5xx are tried again (at
/// `Retry-After` when given); any other status is final, with the answer's text as the error.
public struct WebhookSMS: SMSProvider {
    public struct Options: Sendable {
        public var url: String
        public var bearerToken: String

        public init(url: String, bearerToken: String = "") {
            self.url = url
            self.bearerToken = bearerToken
        }
    }

    public let name = "webhook"
    let options: Options
    let http: ProviderHTTP

    public init(_ options: Options, http: ProviderHTTP) throws {
        try Self.check(options.url, what: "sms webhook")
        self.options = options
        self.http = http
    }

    /// A webhook URL must be http(s) with a host.
    static func check(_ url: String, what: String) throws {
        guard let parsed = URL(string: url), ["https", "http"].contains(parsed.scheme ?? ""), parsed.host != nil else {
            throw ProviderConfigError("\(what): url must be an http(s) URL")
        }
    }

    public func send(_ batch: [OutgoingMessage]) async -> [DeliveryResult] {
        await concurrently(batch, width: 8) { await self.sendOne($0) }
    }

    func sendOne(_ message: OutgoingMessage) async -> DeliveryResult {
        await Self.post(["id": message.idempotencyKey, "channel": "sms", "to": message.address, "body": message.body, "urgent": message.isUrgent],
                        key: message.idempotencyKey, options: options, http: http)
    }

    /// One webhook call (shared with `WebhookEmail`).
    static func post(_ fields: [String: Any], key: String, options: Options, http: ProviderHTTP) async -> DeliveryResult {
        var headers = [("Content-Type", "application/json"), ("Accept", "application/json"), ("Idempotency-Key", key)]
        if !options.bearerToken.isEmpty { headers.append(("Authorization", "Bearer \(options.bearerToken)")) }
        let bytes = (try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])).map(Array.init) ?? []
        let answer = await http.send(.POST, options.url, headers: headers, body: bytes)
        if case .answered(let status, _, _) = answer, (200...299).contains(status) {
            return .delivered(reference: (answer.json?["id"] as? String) ?? key)
        }
        return HTTPOutcome.generic(answer, provider: "webhook")
    }
}
