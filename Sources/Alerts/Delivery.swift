import Foundation
public import FriensoProto
import Logging
import Storage
import Identity
import Wire

/// One message handed to a provider.
public struct OutgoingMessage: Sendable {
    /// The idempotency key of the outbox row `delivery`'s messages (what the built-in providers
    /// record it under in `sent_messages`).
    public static func idempotencyKey(ofDelivery delivery: UInt64) -> String { "frienso-delivery-\(delivery)" }

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
    /// The device's platform, for push (a provider per platform); unspecified for SMS.
    public var platform: AlertsV1.Platform
    /// What it is about ("help_now:7", "watch:3", ...): urgent kinds go out at the highest priority.
    public var source: String

    public init(deliveryID: UInt64, idempotencyKey: String, channel: AlertsV1.Channel, address: String, body: String,
                recipientUserID: UInt64, platform: AlertsV1.Platform = .unspecified, source: String = "") {
        self.deliveryID = deliveryID
        self.idempotencyKey = idempotencyKey
        self.channel = channel
        self.address = address
        self.body = body
        self.recipientUserID = recipientUserID
        self.platform = platform
        self.source = source
    }

    /// helpNow and its escalation, a missed check-in timer, a watch that ended without arriving:
    /// a person may be in danger (push at the highest priority, time-sensitive on iOS).
    public var isUrgent: Bool {
        ["help_now:", "help_escalation:", "timer:", "watch:"].contains { source.hasPrefix($0) }
    }
}

public enum DeliveryResult: Sendable, Equatable {
    /// The provider took it; `reference` is its id for the message.
    case delivered(reference: String)
    /// It did not; a retryable failure is tried again with backoff.
    case failed(String, retryable: Bool)
    /// Refused for now with the provider's own delay (`Retry-After`): tried again no sooner,
    /// and no later than the backoff would have.
    case retryAfter(String, Duration)
    /// The address is dead (an unregistered or invalid device token): failed for good, and the
    /// device is unregistered so nothing is sent to it again.
    case deadAddress(String)

    /// What the attempt log records for it.
    var outcome: AlertsV1.AttemptOutcome {
        switch self {
        case .delivered: .delivered
        case .failed(_, let retryable): retryable ? .retry : .failed
        case .retryAfter: .retry
        case .deadAddress: .deadAddress
        }
    }
}

/// What every delivery provider does: hand a batch of messages over, one result each.
public protocol DeliveryProvider: Sendable {
    var name: String { get }
    /// One result per message, in order.
    func send(_ batch: [OutgoingMessage]) async -> [DeliveryResult]
    /// The name recorded for one message (a router names the provider it picks).
    func providerName(for message: OutgoingMessage) -> String
    /// Whether a message leaves the machine (a network provider): its attempt is logged as
    /// SENDING before it goes, so a crash in between is visible. Default true.
    var sendsOffMachine: Bool { get }
}

extension DeliveryProvider {
    public func providerName(for message: OutgoingMessage) -> String { name }
    public var sendsOffMachine: Bool { true }
}

/// Sends text messages (Twilio, a JSON webhook: the `Deliveries` module; the built-in
/// `RecordingProvider` by default).
public protocol SMSProvider: DeliveryProvider {}

/// Sends push notifications to device tokens (FCM, APNs: the `Deliveries` module).
public protocol PushProvider: DeliveryProvider {}

/// The built-in providers: no network, a durable record of each message sent (the
/// `sent_messages` table, keyed by the idempotency key) and a log line. They are what a
/// deployment without SMS or push credentials uses, and what the tests count.
final class RecordingProvider: SMSProvider, PushProvider {
    let name: String
    /// Its record commits before it answers: nothing to mark as in flight.
    var sendsOffMachine: Bool { false }
    private let store: any AlertsStorage
    private let logger: Logger
    private let now: @Sendable () -> Int64

    init(name: String, store: any AlertsStorage, logger: Logger, now: @escaping @Sendable () -> Int64) {
        self.name = name
        self.store = store
        self.logger = logger
        self.now = now
    }

    /// Records the messages it accepts in a commit of its own. A delivery pass does not call it
    /// for a provider of this type: it takes `answers` and writes the record in its own finishing
    /// transaction (`DeliveryPass.recordsInPass`). This is for a provider composed into another.
    func send(_ batch: [OutgoingMessage]) async -> [DeliveryResult] {
        let at = now()
        let results = answers(batch)
        let accepted = Self.accepted(batch, results)
        do {
            try await store.recordSent(accepted, provider: name, at: at)
        } catch {
            return batch.map { _ in .failed("could not record: \(error)", retryable: true) }
        }
        logSent(accepted)
        return results
    }

    /// What it answers for each message, without recording anything: a phone number must be
    /// E.164, anything else is a final failure (as a real gateway says); the rest is delivered.
    func answers(_ batch: [OutgoingMessage]) -> [DeliveryResult] {
        batch.map { m in
            m.channel == .sms && PhoneNumber.normalize(m.address) != m.address
                ? .failed("not an E.164 phone number", retryable: false) : .delivered(reference: m.idempotencyKey)
        }
    }

    /// The messages `results` accepted (the ones its record holds).
    static func accepted(_ batch: [OutgoingMessage], _ results: [DeliveryResult]) -> [OutgoingMessage] {
        zip(batch, results).filter { $0.1 == .delivered(reference: $0.0.idempotencyKey) }.map(\.0)
    }

    /// Its log line for each message, once the record is committed.
    func logSent(_ accepted: [OutgoingMessage]) {
        for m in accepted {
            logger.info("\(name) sent", metadata: ["delivery": "\(m.deliveryID)", "to": "\(Redact.address(m.address))", "body": "\(m.body)"])
        }
    }
}

public enum Redact {
    /// A phone number or token shortened for logs and operator listings: enough to tell them apart.
    public static func address(_ address: String) -> String {
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
            case .delivered(let reference):
                d.status = .delivered
                d.lastError = ""
                d.reference = reference
            case .failed(let reason, let retryable):
                d.status = !retryable || d.attempts >= policy.maxAttempts ? .failed : .pending
                d.lastError = reason
                d.nextAttemptAtMs = finished + policy.delay(afterAttempt: Int(d.attempts))
            case .retryAfter(let reason, let after):
                d.status = d.attempts >= policy.maxAttempts ? .failed : .pending
                d.lastError = reason
                // Exactly when the provider asked (never sooner; no longer either: an alert waits
                // for nothing else), but not sooner than the first backoff step.
                d.nextAttemptAtMs = finished + max(after.wholeMilliseconds, policy.firstDelay.wholeMilliseconds)
            case .deadAddress(let reason):
                d.status = .failed
                d.lastError = reason
            }
            rows[id] = d
        }
        let changed = Set(postponed).union(skipped.map(\.0)).union(outcomes.map(\.0))
        return due.compactMap { changed.contains($0.deliveryId) ? rows[$0.deliveryId] : nil }
    }
}

/// Sends what the outbox holds. One pass delivers every row due now; the worker loop runs passes.
struct DeliveryPass: Sendable {
    let store: any AlertsStorage
    let peers: any AlertsPeers
    let sms: any SMSProvider
    let push: any PushProvider
    let policy: RetryPolicy
    /// How long the pass holds the rows it took (`AlertsConfig.deliveryClaim`).
    let claim: Duration
    let logger: Logger
    let now: @Sendable () -> Int64
    let observer: (@Sendable ([AlertsV1.Delivery]) -> Void)?

    /// - Returns: when the next row is due (nil: none pending).
    func run() async throws -> Int64? {
        let at = now()
        // Each push row with its device's platform (nil: the device was unregistered since).
        let (read, platforms) = try await store.takeDue(at: at, limit: 256, claimUntil: at + claim.wholeMilliseconds)
        var due = read
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
        let postponed = addressed.postponed
        // A device unregistered after its row was queued gets nothing.
        var skipped: [(UInt64, String)] = addressed.skipped
        for d in due where d.channel == .push && platforms[d.deliveryId] == nil {
            skipped.append((d.deliveryId, "the device was unregistered"))
        }
        let excluded = Set(postponed).union(skipped.map(\.0))
        let ready = due.filter { !excluded.contains($0.deliveryId) }
        func messages(_ channel: AlertsV1.Channel) -> [OutgoingMessage] {
            ready.filter { $0.channel == channel }.map {
                OutgoingMessage(deliveryID: $0.deliveryId, idempotencyKey: OutgoingMessage.idempotencyKey(ofDelivery: $0.deliveryId), channel: $0.channel,
                                address: $0.address, body: $0.body, recipientUserID: $0.recipientUserId,
                                platform: platforms[$0.deliveryId] ?? .unspecified, source: $0.source)
            }
        }
        let smsBatch = messages(.sms), pushBatch = messages(.push)
        let sent = smsBatch.map { ($0, sms.providerName(for: $0)) } + pushBatch.map { ($0, push.providerName(for: $0)) }

        // What leaves the machine is logged as SENDING first: if alerts dies before the answer
        // is recorded, the log says the message may have gone out (the retry reuses its key).
        let offMachine = (sms.sendsOffMachine ? smsBatch.map(\.deliveryID) : []) + (push.sendsOffMachine ? pushBatch.map(\.deliveryID) : [])
        if !offMachine.isEmpty {
            let names = Dictionary(sent.map { ($0.0.deliveryID, $0.1) }, uniquingKeysWith: { a, _ in a })
            try await store.beginAttempts(offMachine.map { ($0, names[$0] ?? "") }, at: now())
        }
        // A built-in provider is not called: its answers are known here, and its record is
        // written in this pass's finishing transaction, so a message counts as sent exactly when
        // its row is marked (one commit per pass instead of two).
        let smsRecorder = Self.recordsInPass ? sms as? RecordingProvider : nil
        let pushRecorder = Self.recordsInPass ? push as? RecordingProvider : nil
        async let smsResults = Self.send(smsBatch, sms, smsRecorder)
        async let pushResults = Self.send(pushBatch, push, pushRecorder)
        let (s, p) = await (smsResults, pushResults)
        // Stopping mid-send: what went out is not known. Nothing is recorded; the attempts stay
        // SENDING and read INTERRUPTED at the next start, which sends them again.
        try Task.checkCancellation()
        // A message a provider gave no result for counts as a retryable failure (never left due).
        func padded(_ results: [DeliveryResult], _ count: Int) -> [DeliveryResult] {
            Array(results.prefix(count)) + Array(repeating: .failed("the provider gave no result", retryable: true), count: max(0, count - results.count))
        }
        let smsAnswers = padded(s, smsBatch.count), pushAnswers = padded(p, pushBatch.count)
        let results = smsAnswers + pushAnswers
        let outcomes = zip(sent, results).map { ($0.0, $1, $0.1) }

        // The rows as they will be after this pass, from what was read (no second read).
        let finished = now()
        let updated = DeliveryPlan(policy: policy).afterPass(
            due, postponed: postponed, skipped: skipped, outcomes: outcomes.map { ($0.0.deliveryID, $0.0.address, $0.1, $0.2) }, at: finished)
        let dead = outcomes.filter { if case .deadAddress = $0.1, $0.0.channel == .push { true } else { false } }.map(\.0.address)
        var recorded: [(recorder: RecordingProvider, messages: [OutgoingMessage])] = []
        if let smsRecorder { recorded.append((smsRecorder, RecordingProvider.accepted(smsBatch, smsAnswers))) }
        if let pushRecorder { recorded.append((pushRecorder, RecordingProvider.accepted(pushBatch, pushAnswers))) }
        let records = recorded.flatMap { r in r.messages.map { (message: $0, provider: r.recorder.name) } }
        // When the next row is due comes from the pass's own transaction (no read of its own).
        let next = try await store.finishPass(updated, answers: outcomes.map { ($0.0.deliveryID, $0.2, $0.1) }, begun: Set(offMachine),
                                              at: finished, deadTokens: Set(dead), sent: records)
        for r in recorded { r.recorder.logSent(r.messages) }
        for (message, result, provider) in outcomes {
            OutboxMetrics.attempted(channel: message.channel, provider: provider, result: result)
        }
        for d in updated where d.status == .failed { OutboxMetrics.failed(channel: d.channel, source: d.source) }
        for token in Set(dead) {
            logger.notice("push token unregistered: the provider says it is no longer valid", metadata: ["token": "\(Redact.address(token))"])
        }
        for d in updated where d.status == .failed {
            logger.error("delivery failed for good", metadata: ["delivery": "\(d.deliveryId)", "source": "\(d.source)", "channel": "\(d.channel.protoName)",
                                                               "provider": "\(d.provider)", "attempts": "\(d.attempts)", "error": "\(d.lastError)"])
        }
        observer?(updated.filter { !postponed.contains($0.deliveryId) })
        return next
    }

    private func nextDue() async throws -> Int64? {
        try await store.nextDue()
    }

    /// A batch through its provider, or a built-in one's answers (recorded by the pass).
    private static func send(_ batch: [OutgoingMessage], _ provider: any DeliveryProvider, _ recorder: RecordingProvider?) async -> [DeliveryResult] {
        guard !batch.isEmpty else { return [] }
        if let recorder { return recorder.answers(batch) }
        return await provider.send(batch)
    }

    /// `FRIENSO_DELIVERY_RECORDS=own-commit`: the built-in providers record in a commit of their
    /// own before the pass finishes, as before item 73 (`docs/benchmarks.md`, issue 16), for A/B
    /// runs of `frienso-bench` (the launcher's children inherit it).
    static let recordsInPass = ProcessInfo.processInfo.environment["FRIENSO_DELIVERY_RECORDS"] != "own-commit"
}
