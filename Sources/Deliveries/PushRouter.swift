public import Alerts
import FriensoProto

/// Push to every platform: iOS devices through APNs when it is configured (else through FCM,
/// which reaches iOS apps too), Android and web devices through FCM. A device no configured
/// provider can reach fails at once with the reason (never left pending, never silently dropped).
public struct PushRouter: PushProvider {
    public let name = "push"
    let fcm: FCMPush?
    let apns: APNsPush?

    public init(fcm: FCMPush?, apns: APNsPush?) {
        self.fcm = fcm
        self.apns = apns
    }

    func provider(for message: OutgoingMessage) -> (any PushProvider)? {
        if message.platform == .ios, let apns { return apns }
        return fcm
    }

    public func providerName(for message: OutgoingMessage) -> String {
        provider(for: message)?.name ?? "none"
    }

    public func send(_ batch: [OutgoingMessage]) async -> [DeliveryResult] {
        var results = [DeliveryResult?](repeating: nil, count: batch.count)
        var groups: [String: (provider: any PushProvider, indices: [Int])] = [:]
        for (i, m) in batch.enumerated() {
            guard let p = provider(for: m) else {
                results[i] = .failed("no push provider is configured for \(m.platform.protoName) devices (alerts.push)", retryable: false)
                continue
            }
            groups[p.name, default: (p, [])].indices.append(i)
        }
        await withTaskGroup(of: ([Int], [DeliveryResult]).self) { group in
            for (_, g) in groups {
                let messages = g.indices.map { batch[$0] }
                group.addTask { (g.indices, await g.provider.send(messages)) }
            }
            for await (indices, answers) in group {
                for (i, r) in zip(indices, answers) { results[i] = r }
            }
        }
        return results.map { $0 ?? .failed("the provider gave no result", retryable: true) }
    }
}
