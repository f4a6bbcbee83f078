import Foundation
public import FriensoProto
import GRDB
import Logging
import Storage
import Identity
import Wire

/// One message handed to a provider.
public struct OutgoingMessage: Sendable {
    public var deliveryID: UInt64
    /// Stable across retries of this delivery: a provider that supports idempotency (an SMS
    /// gateway's client reference, an APNs collapse id) passes it on so a retry after a crash
    /// between sending and recording is not sent twice.
    public var idempotencyKey: String
    public var channel: AlertsV1.Channel
    /// E.164 phone number (SMS) or device token (push).
    public var address: String
    public var body: String
    public var recipientUserID: UInt64
}

public enum DeliveryResult: Sendable, Equatable {
    /// The provider took it; `reference` is its id for the message.
    case delivered(reference: String)
    /// It did not; a retryable failure is tried again with backoff.
    case failed(String, retryable: Bool)
}

/// Sends text messages. A real one (an HTTP SMS gateway) is one new type.
public protocol SMSProvider: Sendable {
    var name: String { get }
    /// One result per message, in order.
    func send(_ batch: [OutgoingMessage]) async -> [DeliveryResult]
}

/// Sends push notifications to device tokens. A real one (APNs, FCM) is one new type.
public protocol PushProvider: Sendable {
    var name: String { get }
    func send(_ batch: [OutgoingMessage]) async -> [DeliveryResult]
}

/// The built-in providers: no network, a durable record of each message sent (the
/// `sent_messages` table, keyed by the idempotency key) and a log line. They are what a
/// deployment without SMS or push credentials uses, and what the tests count.
final class RecordingProvider: SMSProvider, PushProvider {
    let name: String
    private let database: ServiceDatabase
    private let logger: Logger
    private let now: @Sendable () -> Int64

    init(name: String, database: ServiceDatabase, logger: Logger, now: @escaping @Sendable () -> Int64) {
        self.name = name
        self.database = database
        self.logger = logger
        self.now = now
    }

    func send(_ batch: [OutgoingMessage]) async -> [DeliveryResult] {
        let at = now(), name = name
        // A phone number must be E.164; anything else is a final failure, as a real gateway says.
        let results: [DeliveryResult] = batch.map { m in
            m.channel == .sms && PhoneNumber.normalize(m.address) != m.address
                ? .failed("not an E.164 phone number", retryable: false) : .delivered(reference: m.idempotencyKey)
        }
        let accepted = zip(batch, results).filter { $0.1 == .delivered(reference: $0.0.idempotencyKey) }.map(\.0)
        do {
            try await database.write { db in
                for m in accepted {
                    try db.run(sql: """
                        INSERT OR IGNORE INTO sent_messages (idempotency_key, provider, channel, address, body, sent_at_ms) VALUES (?, ?, ?, ?, ?, ?)
                        """, arguments: [m.idempotencyKey, name, m.channel.rawValue, m.address, m.body, at])
                }
            }
        } catch {
            return batch.map { _ in .failed("could not record: \(error)", retryable: true) }
        }
        for m in accepted {
            logger.info("\(name) sent", metadata: ["delivery": "\(m.deliveryID)", "to": "\(Redact.address(m.address))", "body": "\(m.body)"])
        }
        return results
    }
}

enum Redact {
    /// A phone number or token shortened for logs and operator listings: enough to tell them apart.
    static func address(_ address: String) -> String {
        address.count <= 8 ? address : "\(address.prefix(4))…\(address.suffix(4))"
    }
}

/// How deliveries are retried.
public struct RetryPolicy: Sendable {
    public var maxAttempts = 6
    public var firstDelay: Duration = .seconds(1)
    public var maxDelay: Duration = .seconds(300)
    /// When accounts cannot say a user's phone number, try again this much later (not an attempt).
    public var lookupDelay: Duration = .seconds(2)
    public init() {}

    func delay(afterAttempt attempt: Int) -> Int64 {
        let first = firstDelay.wholeMilliseconds, cap = maxDelay.wholeMilliseconds
        let shift = min(max(attempt - 1, 0), 30)
        return min(cap, first << shift)
    }
}

/// The delivery rules as values (no store, no provider, no clock): which due rows can be sent,
/// and what every row becomes after a pass. `DeliveryPass` is the shell that reads, sends and writes.
struct DeliveryPlan {
    let policy: RetryPolicy

    /// Gives each user's SMS its phone number. `phones` nil: the lookup failed, so those SMS are
    /// postponed (no attempt spent); a user with no number is skipped, with the reason.
    static func addressed(_ due: [AlertsV1.Delivery], phones: [UInt64: String]?)
        -> (due: [AlertsV1.Delivery], postponed: [UInt64], skipped: [(UInt64, String)]) {
        var due = due, postponed: [UInt64] = [], skipped: [(UInt64, String)] = []
        for i in due.indices where due[i].channel == .sms && due[i].address.isEmpty {
            guard let phones else {
                postponed.append(due[i].deliveryId)
                continue
            }
            if let phone = phones[due[i].recipientUserId], !phone.isEmpty {
                due[i].address = phone
            } else {
                skipped.append((due[i].deliveryId, "no phone number for user \(due[i].recipientUserId)"))
            }
        }
        return (due, postponed, skipped)
    }

    /// The rows a pass changed, as they are after it: postponed ones due again after
    /// `lookupDelay`; skipped ones SKIPPED; sent ones DELIVERED, or after a failure PENDING with
    /// backoff, or FAILED when the provider says it is final or the attempts are spent.
    /// - Parameter outcomes: per message sent: its row, the address used, the result, the provider.
    func afterPass(_ due: [AlertsV1.Delivery], postponed: [UInt64], skipped: [(UInt64, String)],
                   outcomes: [(UInt64, String, DeliveryResult, String)], at finished: Int64) -> [AlertsV1.Delivery] {
        var rows = Dictionary(uniqueKeysWithValues: due.map { ($0.deliveryId, $0) })
        for id in postponed {
            rows[id]?.nextAttemptAtMs = finished + policy.lookupDelay.wholeMilliseconds
            rows[id]?.updatedAtMs = finished
        }
        for (id, reason) in skipped {
            rows[id]?.status = .skipped
            rows[id]?.lastError = reason
            rows[id]?.updatedAtMs = finished
        }
        for (id, address, result, provider) in outcomes {
            guard var d = rows[id] else { continue }
            d.attempts += 1
            d.provider = provider
            d.address = address
            d.updatedAtMs = finished
            switch result {
            case .delivered:
                d.status = .delivered
                d.lastError = ""
            case .failed(let reason, let retryable):
                d.status = !retryable || d.attempts >= policy.maxAttempts ? .failed : .pending
                d.lastError = reason
                d.nextAttemptAtMs = finished + policy.delay(afterAttempt: Int(d.attempts))
            }
            rows[id] = d
        }
        let changed = Set(postponed).union(skipped.map(\.0)).union(outcomes.map(\.0))
        return due.compactMap { changed.contains($0.deliveryId) ? rows[$0.deliveryId] : nil }
    }
}

/// Sends what the outbox holds. One pass delivers every row due now; the worker loop runs passes.
struct DeliveryPass: Sendable {
    let store: AlertsStore
    let peers: any AlertsPeers
    let sms: any SMSProvider
    let push: any PushProvider
    let policy: RetryPolicy
    let logger: Logger
    let now: @Sendable () -> Int64
    let observer: (@Sendable ([AlertsV1.Delivery]) -> Void)?

    /// - Returns: when the next row is due (nil: none pending).
    func run() async throws -> Int64? {
        let at = now()
        var due = try await store.database.read { db in
            try Row.fetchAll(db, cached: "SELECT \(AlertsStore.deliveryColumns) FROM outbox WHERE status = 1 AND next_attempt_ms <= ? ORDER BY next_attempt_ms, id LIMIT 256",
                             arguments: [at]).map(AlertsStore.delivery)
        }
        guard !due.isEmpty else { return try await nextDue() }

        // Phone numbers of users, looked up now (so a changed number is used).
        let lookups = Set(due.filter { $0.channel == .sms && $0.address.isEmpty }.map(\.recipientUserId))
        var phones: [UInt64: String]? = [:]
        if !lookups.isEmpty {
            do {
                phones = try await peers.phones(lookups)
            } catch {
                logger.warning("phone numbers unavailable; SMS postponed", metadata: ["error": "\(error)"])
                phones = nil
            }
        }
        let addressed = DeliveryPlan.addressed(due, phones: phones)
        due = addressed.due
        let postponed = addressed.postponed, skipped = addressed.skipped
        let excluded = Set(postponed).union(skipped.map(\.0))
        let ready = due.filter { !excluded.contains($0.deliveryId) }
        func messages(_ channel: AlertsV1.Channel) -> [OutgoingMessage] {
            ready.filter { $0.channel == channel }.map {
                OutgoingMessage(deliveryID: $0.deliveryId, idempotencyKey: "frienso-delivery-\($0.deliveryId)", channel: $0.channel,
                                address: $0.address, body: $0.body, recipientUserID: $0.recipientUserId)
            }
        }
        let smsBatch = messages(.sms), pushBatch = messages(.push)
        async let smsResults = smsBatch.isEmpty ? [] : sms.send(smsBatch)
        async let pushResults = pushBatch.isEmpty ? [] : push.send(pushBatch)
        let (s, p) = await (smsResults, pushResults)
        // A message a provider gave no result for counts as a retryable failure (never left due).
        func padded(_ results: [DeliveryResult], _ count: Int) -> [DeliveryResult] {
            Array(results.prefix(count)) + Array(repeating: .failed("the provider gave no result", retryable: true), count: max(0, count - results.count))
        }
        let outcomes = zip(smsBatch, padded(s, smsBatch.count)).map { ($0, $1, sms.name) }
            + zip(pushBatch, padded(p, pushBatch.count)).map { ($0, $1, push.name) }

        // The rows as they will be after this pass, from what was read (no second read).
        let updated = DeliveryPlan(policy: policy).afterPass(
            due, postponed: postponed, skipped: skipped, outcomes: outcomes.map { ($0.0.deliveryID, $0.0.address, $0.1, $0.2) }, at: now())
        try await store.database.write { db in
            for d in updated {
                try db.run(sql: """
                    UPDATE outbox SET status = ?, attempts = ?, provider = ?, address = ?, last_error = ?, updated_at_ms = ?, next_attempt_ms = ?
                    WHERE id = ?
                    """, arguments: [d.status.rawValue, d.attempts, d.provider, d.address, d.lastError, d.updatedAtMs, d.nextAttemptAtMs, d.deliveryId])
            }
        }
        for d in updated where d.status == .failed {
            logger.error("delivery failed for good", metadata: ["delivery": "\(d.deliveryId)", "source": "\(d.source)", "channel": "\(d.channel.protoName)",
                                                               "attempts": "\(d.attempts)", "error": "\(d.lastError)"])
        }
        observer?(updated.filter { !postponed.contains($0.deliveryId) })
        return try await nextDue()
    }

    private func nextDue() async throws -> Int64? {
        try await store.database.read { db in try Int64.fetchOne(db, cached: "SELECT MIN(next_attempt_ms) FROM outbox WHERE status = 1") }
    }
}
