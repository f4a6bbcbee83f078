public import Accounts
import Foundation

/// Email through a JSON webhook (an email API's relay, or the operator's own): one `POST` per
/// message with `{"id", "channel": "email", "to", "subject", "body"}`, `Idempotency-Key: <id>`
/// and, when configured, `Authorization: Bearer <token>`: the same contract as the SMS webhook
/// (`WebhookSMS`), and the same reading of the answer (2xx delivered; 408, 429, 5xx again;
/// other statuses final).
public struct WebhookEmail: EmailProvider {
    public let name = "webhook"
    let options: WebhookSMS.Options
    let http: ProviderHTTP

    public init(_ options: WebhookSMS.Options, http: ProviderHTTP) throws {
        try WebhookSMS.check(options.url, what: "email webhook")
        self.options = options
        self.http = http
    }

    public func send(_ message: EmailMessage) async -> EmailResult {
        let fields: [String: Any] = ["id": message.idempotencyKey, "channel": "email", "to": message.to, "subject": message.subject, "body": message.body]
        switch await WebhookSMS.post(fields, key: message.idempotencyKey, options: options, http: http) {
        case .delivered(let reference): return .delivered(reference: reference)
        case .failed(let why, let retryable): return .failed(why, retryable: retryable)
        case .retryAfter(let why, _): return .failed(why, retryable: true)
        case .deadAddress(let why): return .failed(why, retryable: false)
        }
    }
}
