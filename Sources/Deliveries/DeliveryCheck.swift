import Accounts
import Alerts
import Foundation
public import FriensoProto
public import Logging
public import ServiceKit

/// `frienso-launch deliveries test`: one message through the configured provider, straight
/// (no outbox, no retry), and what the provider said, in words an operator acts on.
public enum DeliveryCheck {
    public enum Outcome: Sendable, Equatable {
        case delivered, refused, notConfigured
    }

    /// - Parameters:
    ///   - to: an E.164 phone number (SMS) or a device token (push).
    ///   - platform: the device's, for a token (iOS goes to APNs when it is configured).
    public static func run(_ providers: DeliveryProviders, to address: String, platform: AlertsV1.Platform) async -> (Outcome, String) {
        let isPhone = address.hasPrefix("+")
        let channel: AlertsV1.Channel = isPhone ? .sms : .push
        let provider: (any DeliveryProvider)? = isPhone ? providers.sms : providers.push
        guard let provider else {
            let section = isPhone ? "alerts.sms" : "alerts.push"
            return (.notConfigured, "\(section) is not configured: the built-in recorder writes messages to alerts' database and sends nothing over a network (docs/operations.md)")
        }
        let stamp = ISO8601DateFormatter().string(from: Date())
        let message = OutgoingMessage(
            deliveryID: UInt64.random(in: 1...UInt64(Int64.max)), idempotencyKey: "frienso-test-\(UUID().uuidString.lowercased())",
            channel: channel, address: address,
            body: "Frienso test message (\(stamp)): if you read this, \(isPhone ? "text messages" : "notifications") reach this \(isPhone ? "phone" : "device").",
            recipientUserID: 0, platform: isPhone ? .unspecified : platform, source: "test")
        let via = provider.providerName(for: message)
        let result = await provider.send([message]).first ?? .failed("the provider gave no result", retryable: true)
        switch result {
        case .delivered(let reference):
            return (.delivered, "\(channel == .sms ? "SMS" : "push") to \(Redact.address(address)) via \(via): delivered (provider's id \(reference.isEmpty ? "none" : reference))")
        case .failed(let why, let retryable):
            return (.refused, "\(channel == .sms ? "SMS" : "push") to \(Redact.address(address)) via \(via): refused (\(retryable ? "alerts would try again" : "final")): \(why)")
        case .retryAfter(let why, let after):
            return (.refused, "\(channel == .sms ? "SMS" : "push") to \(Redact.address(address)) via \(via): refused for now, retry after \(after): \(why)")
        case .deadAddress(let why):
            return (.refused, "push to \(Redact.address(address)) via \(via): the token is dead (alerts would unregister the device): \(why)")
        }
    }

    /// One test email through `accounts.email`.
    public static func run(_ providers: EmailProviders, to address: String) async -> (Outcome, String) {
        guard let email = providers.email else {
            return (.notConfigured, "accounts.email is not configured: the built-in recorder writes emails to accounts' database and sends nothing over a network (docs/operations.md)")
        }
        let stamp = ISO8601DateFormatter().string(from: Date())
        let message = EmailMessage(deliveryID: UInt64.random(in: 1...UInt64(Int64.max)), idempotencyKey: "frienso-test-\(UUID().uuidString.lowercased())",
                                   to: address, subject: "Frienso test message",
                                   body: "Frienso test message (\(stamp)): if you read this, Frienso's emails reach this address.")
        switch await email.send(message) {
        case .delivered(let reference):
            return (.delivered, "email to \(address) via \(email.name): delivered (\(reference.isEmpty ? "no id" : reference))")
        case .failed(let why, let retryable):
            return (.refused, "email to \(address) via \(email.name): refused (\(retryable ? "accounts would try again" : "final")): \(why)")
        }
    }

    /// The whole check for `frienso-launch deliveries test`: the configured providers, one
    /// message to `address` (an email address, an E.164 number or a device token), the
    /// providers' HTTP client closed after.
    /// - Parameter platform: "ios", "android" or "web", for a device token.
    public static func run(_ resolved: ResolvedOptions, to address: String, platform: String, logger: Logger) async throws -> (Outcome, String) {
        let platforms: [String: AlertsV1.Platform] = ["ios": .ios, "android": .android, "web": .web]
        guard let device = platforms[platform] else { throw ProviderConfigError("--platform is ios, android or web") }
        if address.contains("@") {
            let providers = try EmailProviders(resolved: resolved, logger: logger)
            let result = await run(providers, to: address)
            await providers.http?.shutdown()
            return result
        }
        let providers = try DeliveryProviders(resolved: resolved, logger: logger)
        let result = await run(providers, to: address, platform: device)
        await providers.http?.shutdown()
        return result
    }
}
