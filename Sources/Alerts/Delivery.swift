import Foundation
public import FriensoProto
import GRDB
import Logging
import ServiceKit
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
    private let database: DatabasePool
    private let logger: Logger
    private let now: @Sendable () -> Int64

    init(name: String, database: DatabasePool, logger: Logger, now: @escaping @Sendable () -> Int64) {
        self.name = name
        self.database = database
        self.logger = logger
        self.now = now
    }

    /// What it would answer for `message` (a phone number must be E.164).
    func check(_ message: OutgoingMessage) -> DeliveryResult {
        message.channel == .sms && PhoneNumber.normalize(message.address) != message.address
            ? .failed("not an E.164 phone number", retryable: false) : .delivered(reference: message.idempotencyKey)
    }

    /// Records `message` as sent, inside the caller's transaction.
    static func record(_ db: Database, _ m: OutgoingMessage, provider: String, at: Int64) throws {
        try db.execute(sql: """
            INSERT OR IGNORE INTO sent_messages (idempotency_key, provider, channel, address, body, sent_at_ms) VALUES (?, ?, ?, ?, ?, ?)
            """, arguments: [m.idempotencyKey, provider, m.channel.rawValue, m.address, m.body, at])
    }

    func send(_ batch: [OutgoingMessage]) async -> [DeliveryResult] {
        let at = now()
        var results: [DeliveryResult] = []
        var accepted: [OutgoingMessage] = []
        for message in batch {
            if message.channel == .sms, PhoneNumber.normalize(message.address) != message.address {
                results.append(.failed("not an E.164 phone number", retryable: false))
            } else {
                results.append(.delivered(reference: message.idempotencyKey))
                accepted.append(message)
            }
        }
        do {
            let accepted = accepted
            try await database.write { db in
                for m in accepted {
                    try db.execute(sql: """
                        INSERT OR IGNORE INTO sent_messages (idempotency_key, provider, channel, address, body, sent_at_ms) VALUES (?, ?, ?, ?, ?, ?)
                        """, arguments: [m.idempotencyKey, self.name, m.channel.rawValue, m.address, m.body, at])
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
            try Row.fetchAll(db, sql: "SELECT * FROM outbox WHERE status = 1 AND next_attempt_ms <= ? ORDER BY next_attempt_ms, id LIMIT 256",
                             arguments: [at]).map(AlertsStore.delivery)
        }
        guard !due.isEmpty else { return try await nextDue() }

        // Phone numbers of users, looked up now (so a changed number is used).
        var postponed: [UInt64] = [], skipped: [(UInt64, String)] = []
        let lookups = Set(due.filter { $0.channel == .sms && $0.address.isEmpty }.map(\.recipientUserId))
        if !lookups.isEmpty {
            do {
                let phones = try await peers.phones(lookups)
                for i in due.indices where due[i].channel == .sms && due[i].address.isEmpty {
                    if let phone = phones[due[i].recipientUserId], !phone.isEmpty { due[i].address = phone } else {
                        skipped.append((due[i].deliveryId, "no phone number for user \(due[i].recipientUserId)"))
                    }
                }
            } catch {
                logger.warning("phone numbers unavailable; SMS postponed", metadata: ["error": "\(error)"])
                postponed = due.filter { $0.channel == .sms && $0.address.isEmpty }.map(\.deliveryId)
            }
        }
        let excluded = Set(postponed).union(skipped.map(\.0))
        let ready = due.filter { !excluded.contains($0.deliveryId) }
        func messages(_ channel: AlertsV1.Channel) -> [OutgoingMessage] {
            ready.filter { $0.channel == channel }.map {
                OutgoingMessage(deliveryID: $0.deliveryId, idempotencyKey: "frienso-delivery-\($0.deliveryId)", channel: $0.channel,
                                address: $0.address, body: $0.body, recipientUserID: $0.recipientUserId)
            }
        }
        // The built-in providers record in this database: in the transaction that marks the rows
        // (exactly once, and one commit instead of two). Other providers are called first.
        let local = (sms: sms as? RecordingProvider, push: push as? RecordingProvider)
        let smsBatch = messages(.sms), pushBatch = messages(.push)
        async let smsResults = smsBatch.isEmpty || local.sms != nil ? [] : sms.send(smsBatch)
        async let pushResults = pushBatch.isEmpty || local.push != nil ? [] : push.send(pushBatch)
        var outcomes: [(OutgoingMessage, DeliveryResult, String)] = []
        let (s, p) = await (smsResults, pushResults)
        for (m, r) in zip(smsBatch, local.sms.map { l in smsBatch.map(l.check) } ?? s) { outcomes.append((m, r, sms.name)) }
        for (m, r) in zip(pushBatch, local.push.map { l in pushBatch.map(l.check) } ?? p) { outcomes.append((m, r, push.name)) }
        let recordLocally = outcomes.filter { m, r, _ in
            if case .delivered = r { return (m.channel == .sms ? local.sms : local.push) != nil }
            return false
        }.map { ($0.0, $0.2) }
        // A provider that answered fewer results than messages: the rest stay pending and are retried.

        let policy = policy, finished = at
        let (postponedIDs, skippedRows, outcomeRows) = (postponed, skipped, outcomes)
        let updated = try await store.database.write { db -> [AlertsV1.Delivery] in
            for id in postponedIDs {
                try db.execute(sql: "UPDATE outbox SET next_attempt_ms = ?, updated_at_ms = ? WHERE id = ?",
                               arguments: [finished + policy.lookupDelay.wholeMilliseconds, finished, id])
            }
            for (id, reason) in skippedRows {
                try db.execute(sql: "UPDATE outbox SET status = ?, last_error = ?, updated_at_ms = ? WHERE id = ?",
                               arguments: [AlertsV1.DeliveryStatus.skipped.rawValue, reason, finished, id])
            }
            for (m, provider) in recordLocally { try RecordingProvider.record(db, m, provider: provider, at: finished) }
            for (m, result, provider) in outcomeRows {
                let attempts = try Int.fetchOne(db, sql: "SELECT attempts FROM outbox WHERE id = ?", arguments: [m.deliveryID]) ?? 0
                switch result {
                case .delivered:
                    try db.execute(sql: """
                        UPDATE outbox SET status = ?, attempts = ?, provider = ?, address = ?, last_error = '', updated_at_ms = ? WHERE id = ?
                        """, arguments: [AlertsV1.DeliveryStatus.delivered.rawValue, attempts + 1, provider, m.address, finished, m.deliveryID])
                case .failed(let reason, let retryable):
                    let final = !retryable || attempts + 1 >= policy.maxAttempts
                    try db.execute(sql: """
                        UPDATE outbox SET status = ?, attempts = ?, provider = ?, address = ?, last_error = ?, updated_at_ms = ?,
                                          next_attempt_ms = ? WHERE id = ?
                        """, arguments: [(final ? AlertsV1.DeliveryStatus.failed : .pending).rawValue, attempts + 1, provider, m.address,
                                         reason, finished, finished + policy.delay(afterAttempt: attempts + 1), m.deliveryID])
                }
            }
            let ids = outcomeRows.map { Int64($0.0.deliveryID) } + skippedRows.map { Int64($0.0) }
            guard !ids.isEmpty else { return [] }
            return try Row.fetchAll(db, sql: "SELECT * FROM outbox WHERE id IN (\(ids.map { _ in "?" }.joined(separator: ",")))",
                                    arguments: StatementArguments(ids)).map(AlertsStore.delivery)
        }
        for (m, provider) in recordLocally {
            logger.info("\(provider) sent", metadata: ["delivery": "\(m.deliveryID)", "to": "\(Redact.address(m.address))", "body": "\(m.body)"])
        }
        for d in updated where d.status == .failed {
            logger.error("delivery failed for good", metadata: ["delivery": "\(d.deliveryId)", "source": "\(d.source)", "channel": "\(d.channel.protoName)",
                                                               "attempts": "\(d.attempts)", "error": "\(d.lastError)"])
        }
        observer?(updated)
        return try await nextDue()
    }

    private func nextDue() async throws -> Int64? {
        try await store.database.read { db in try Int64.fetchOne(db, sql: "SELECT MIN(next_attempt_ms) FROM outbox WHERE status = 1") }
    }
}
