public import Accounts
public import Alerts
import Foundation
public import Logging
public import ServiceKit

/// The delivery providers the `alerts` section names (`alerts.sms`, `alerts.push`); nil for a
/// channel that keeps the built-in recorder. Reads every credential file now, so a deployment
/// with a wrong path or key fails at start, not at the first helpNow. Used by `frienso-alerts`
/// and by `frienso-launch deliveries test`.
public struct DeliveryProviders: Sendable {
    public var sms: (any SMSProvider)?
    public var push: (any PushProvider)?
    /// The HTTP client they share (nil when neither uses the network): shut it down when done.
    public var http: ProviderHTTP?

    public init(resolved: ResolvedOptions, logger: Logger) throws {
        let section = resolved.config.alerts
        let smsKind = section?.sms?.provider ?? "recording"
        let fcm = section?.push?.fcm, apns = section?.push?.apns
        guard smsKind != "recording" || fcm != nil || apns != nil else { return }
        let http = try ProviderHTTP(caFile: section?.providerCAFile)
        self.http = http

        switch smsKind {
        case "twilio":
            let s = section?.sms
            guard let sid = s?.accountSid, let tokenFile = s?.authTokenFile else {
                throw ConfigError("alerts.sms: twilio needs accountSid and authTokenFile")
            }
            sms = try TwilioSMS(.init(accountSID: sid, authToken: try SecretFile.read(tokenFile, what: "alerts.sms.authTokenFile", logger: logger),
                                      from: s?.from ?? "", messagingServiceSID: s?.messagingServiceSid ?? "",
                                      baseURL: s?.url ?? "https://api.twilio.com"), http: http, logger: logger)
        case "webhook":
            guard let url = section?.sms?.url else { throw ConfigError("alerts.sms: webhook needs url") }
            let token = try section?.sms?.bearerTokenFile.map { try SecretFile.read($0, what: "alerts.sms.bearerTokenFile", logger: logger) }
            sms = try WebhookSMS(.init(url: url, bearerToken: token ?? ""), http: http)
        case "recording":
            break
        default:
            throw ConfigError("alerts.sms.provider: \"recording\", \"twilio\" or \"webhook\", not \"\(smsKind)\"")
        }

        var fcmPush: FCMPush?, apnsPush: APNsPush?
        if let fcm {
            guard let file = fcm.serviceAccountFile else { throw ConfigError("alerts.push.fcm: serviceAccountFile is required") }
            let text = try SecretFile.read(file, what: "alerts.push.fcm.serviceAccountFile", logger: logger)
            let account: FCMPush.ServiceAccount
            do { account = try JSONDecoder().decode(FCMPush.ServiceAccount.self, from: Data(text.utf8)) } catch {
                throw ConfigError("alerts.push.fcm: \(file) is not a service account key file (project_id, client_email, private_key, token_uri)")
            }
            fcmPush = try FCMPush(.init(account: account, baseURL: fcm.url ?? "https://fcm.googleapis.com"), http: http, logger: logger)
        }
        if let apns {
            guard let file = apns.keyFile, let keyID = apns.keyId, let teamID = apns.teamId, let topic = apns.topic else {
                throw ConfigError("alerts.push.apns: keyFile, keyId, teamId and topic are required")
            }
            let base = apns.url ?? (apns.sandbox == true ? APNsPush.Options.sandbox : APNsPush.Options.production)
            apnsPush = try APNsPush(.init(key: try SecretFile.read(file, what: "alerts.push.apns.keyFile", logger: logger),
                                          keyID: keyID, teamID: teamID, topic: topic, baseURL: base), http: http, logger: logger)
        }
        if fcmPush != nil || apnsPush != nil { push = PushRouter(fcm: fcmPush, apns: apnsPush) }
        logger.notice("delivery providers", metadata: ["sms": "\(sms?.name ?? "recording")",
                                                       "push": "\([fcmPush?.name, apnsPush?.name].compactMap { $0 }.joined(separator: "+").ifEmpty("recording"))"])
    }
}

extension String {
    func ifEmpty(_ other: String) -> String { isEmpty ? other : self }
}

/// The email provider the `accounts.email` section names; nil: the built-in recorder.
public struct EmailProviders: Sendable {
    public var email: (any EmailProvider)?
    /// The webhook's HTTP client (shut it down when done); nil for SMTP and the recorder.
    public var http: ProviderHTTP?

    public init(resolved: ResolvedOptions, logger: Logger) throws {
        guard let section = resolved.config.accounts?.email else { return }
        switch section.provider ?? "recording" {
        case "recording":
            return
        case "smtp":
            guard let host = section.host, let from = section.from else { throw ConfigError("accounts.email: smtp needs host and from") }
            guard let security = SMTPEmail.Security(rawValue: section.security ?? "starttls") else {
                throw ConfigError("accounts.email.security: \"starttls\", \"tls\" or \"none\"")
            }
            let password = try section.passwordFile.map { try SecretFile.read($0, what: "accounts.email.passwordFile", logger: logger) } ?? ""
            email = try SMTPEmail(.init(host: host, port: section.port ?? (security == .implicitTLS ? 465 : 587), security: security,
                                        username: section.username ?? "", password: password, from: from, heloName: section.heloName ?? "",
                                        caFile: section.caFile), logger: logger)
        case "webhook":
            guard let url = section.url else { throw ConfigError("accounts.email: webhook needs url") }
            let token = try section.bearerTokenFile.map { try SecretFile.read($0, what: "accounts.email.bearerTokenFile", logger: logger) }
            let http = try ProviderHTTP(caFile: section.caFile)
            self.http = http
            email = try WebhookEmail(.init(url: url, bearerToken: token ?? ""), http: http)
        case let other:
            throw ConfigError("accounts.email.provider: \"recording\", \"smtp\" or \"webhook\", not \"\(other)\"")
        }
        logger.notice("email provider", metadata: ["provider": "\(email?.name ?? "recording")"])
    }
}
