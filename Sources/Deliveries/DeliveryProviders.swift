import Alerts
import Deliveries
import Foundation
import Logging
import ServiceKit

/// The delivery providers the `alerts` section names (`alerts.sms`, `alerts.push`); nil for a
/// channel that keeps the built-in recorder. Reads every credential file now, so a deployment
/// with a wrong path or key fails at start, not at the first helpNow.
struct ResolvedProviders {
    var sms: (any SMSProvider)?
    var push: (any PushProvider)?
    /// The HTTP client they share (nil when neither uses the network).
    var http: ProviderHTTP?

    init(resolved: ResolvedOptions, logger: Logger) throws {
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
