import ServiceKit
public import Alerts
import Foundation
public import Logging

/// SMS through Twilio's Programmable Messaging REST API: one `POST
/// /2010-04-01/Accounts/{AccountSid}/Messages.json` per message, form-encoded (`To`, `Body`, and
/// `From` or `MessagingServiceSid`), HTTP basic authentication with the account SID and auth
/// token. Twilio answers 201 with the message's SID (`SM…`), recorded as the delivery's reference.
///
/// Failures, as Twilio documents them: a 400 is about this message (21211 an invalid number,
/// 21614 not a mobile number, 21610 the recipient replied STOP, …): failed for good. 429 (20429)
/// and 5xx are tried again, at `Retry-After` when Twilio gives one. 401, 403 and 404 mean the
/// account's credentials or SID are wrong: tried again with backoff (the operator may be fixing
/// them) and logged as errors. Twilio has no idempotency key for messages: a crash between its
/// 201 and alerts' record sends that SMS again (the attempt log shows it as INTERRUPTED).
public struct TwilioSMS: SMSProvider {
    public struct Options: Sendable {
        public var accountSID: String
        public var authToken: String
        /// A Twilio number in E.164, or empty when `messagingServiceSID` is set.
        public var from: String
        public var messagingServiceSID: String
        /// `https://api.twilio.com` unless pointed elsewhere (a test server).
        public var baseURL: String

        public init(accountSID: String, authToken: String, from: String = "", messagingServiceSID: String = "",
                    baseURL: String = "https://api.twilio.com") {
            self.accountSID = accountSID
            self.authToken = authToken
            self.from = from
            self.messagingServiceSID = messagingServiceSID
            self.baseURL = baseURL
        }
    }

    public let name = "twilio"
    let options: Options
    let http: ProviderHTTP
    let logger: Logger

    public init(_ options: Options, http: ProviderHTTP, logger: Logger) throws {
        guard options.accountSID.hasPrefix("AC"), options.accountSID.count == 34 else {
            throw ProviderConfigError("twilio: accountSid must be the account's SID (AC followed by 32 hex digits)")
        }
        guard !options.authToken.isEmpty else { throw ProviderConfigError("twilio: the auth token file is empty") }
        guard !options.from.isEmpty || !options.messagingServiceSID.isEmpty else {
            throw ProviderConfigError("twilio: set from (a Twilio number in E.164) or messagingServiceSid")
        }
        self.options = options
        self.http = http
        self.logger = logger
    }

    public func send(_ batch: [OutgoingMessage]) async -> [DeliveryResult] {
        await concurrently(batch, width: 8) { await self.sendOne($0) }
    }

    var url: String {
        "\(options.baseURL.trimmingSuffix("/"))/2010-04-01/Accounts/\(FormEncoding.escape(options.accountSID))/Messages.json"
    }

    func sendOne(_ message: OutgoingMessage) async -> DeliveryResult {
        var fields = [("To", message.address), ("Body", message.body)]
        fields.append(options.messagingServiceSID.isEmpty ? ("From", options.from) : ("MessagingServiceSid", options.messagingServiceSID))
        let credentials = Data("\(options.accountSID):\(options.authToken)".utf8).base64EncodedString()
        let answer = await http.send(.POST, url, headers: [
            ("Authorization", "Basic \(credentials)"),
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Accept", "application/json"),
        ], body: FormEncoding.encode(fields))
        return classify(answer)
    }

    func classify(_ answer: ProviderAnswer) -> DeliveryResult {
        guard case .answered(let status, _, _) = answer else { return HTTPOutcome.generic(answer, provider: name) }
        let json = answer.json
        if status == 200 || status == 201, let sid = json?["sid"] as? String, !sid.isEmpty {
            return .delivered(reference: sid)
        }
        let code = (json?["code"] as? Int).map { " \($0)" } ?? ""
        let detail = (json?["message"] as? String).map { "twilio\(code): \($0)" }
        switch status {
        case 401, 403, 404:
            logger.error("twilio refused the account's credentials or SID: check alerts.sms", metadata: ["status": "\(status)", "code": "\(code)"])
            return .failed("twilio answered \(status)\(detail.map { ": \($0)" } ?? "")", retryable: true)
        default:
            return HTTPOutcome.generic(answer, provider: name, detail: detail)
        }
    }
}

/// A provider's configuration that cannot work (said at start, not at the first alert).
extension String {
    func trimmingSuffix(_ suffix: String) -> String {
        var s = self
        while s.hasSuffix(suffix) { s.removeLast(suffix.count) }
        return s
    }
}
