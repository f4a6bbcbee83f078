import Foundation
import FriensoProto
import Storage
import Wire

/// Escalation: a helpNow that nobody in the circle has accepted ("on my way") within
/// `helpEscalation` is sent again to everyone who has not answered, and the person in danger gets
/// a prompt to call campus police (or the emergency number) with their location now. Once per
/// alert; the record is part of the alert (`HelpAlert.escalation`), and answers stay visible to the
/// person as before (GetHelpNow, pushes, live events).
extension AlertsService {
    /// Escalates every active alert whose time came. - Returns: alerts escalated.
    @discardableResult
    public func escalateDueAlerts() async throws -> Int {
        let at = now()
        let cutoff = at - config.helpEscalation.wholeMilliseconds
        let due = try await store.escalationsDue(raisedBy: cutoff)
        var escalated = 0
        for id in due where try await escalate(id, at: at) { escalated += 1 }
        return escalated
    }

    private func escalate(_ id: UInt64, at: Int64) async throws -> Bool {
        guard let alert = try await store.alert(id: id) else { return false }
        // Where the person is now (they may have moved since the alert); the alert's place if geo
        // cannot say, or if geo's fix is older (the phone's own, sent with the raise, may be newer).
        var located = alert.location
        if let now = try? await peers.latestLocation(of: alert.initiator, phoneFix: nil), now.known,
           !located.known || now.fixTimeMs >= located.fixTimeMs { located = now }
        let location = located
        let users = alert.recipients.map(\.user).filter { $0 != 0 }
        let names = await people(Set(users + [alert.initiator]))
        let number = config.campusPoliceNumber.isEmpty ? config.emergencyNumber : config.campusPoliceNumber
        let label = config.campusPoliceNumber.isEmpty ? config.emergencyLabel : config.campusPoliceLabel
        let again = "STILL NO ANSWER: " + Self.helpText(names[alert.initiator], alert.message, location)
        let toInitiator = "Nobody in your circle has said they are on the way yet. Call \(label) now: \(number)."
        let result = try await store.changeAlert(.id(id), at: at) { current in
            // Resolved, escalated or accepted meanwhile (another pass, another instance, an answer).
            guard let current, current.state == .active, current.escalation == nil,
                  !current.recipients.contains(where: { $0.answer == .accepted }) else { return nil }
            let silent = current.recipients.filter { $0.answer == .pending }
            return AlertChange(escalation: AlertsV1.Escalation(escalatedAtMs: at, number: number, label: label, location: location,
                                                               resentTo: UInt32(silent.count)),
                               messages: silent.map { r in
                r.user != 0 ? Outgoing(source: "help_now_resend:\(id)", recipient: .user(r.user), channels: [.push, .sms], body: again, about: current.initiator)
                            : Outgoing(source: "help_now_resend:\(id)", recipient: .phone(r.phone), channels: [.sms], body: again, about: current.initiator)
            } + [Outgoing(source: "help_now_escalated:\(id)", recipient: .user(current.initiator), channels: [.push], body: toInitiator,
                          about: current.initiator)])
        }
        guard let (record, change) = result else { return false }
        let resent = change.escalation?.resentTo ?? 0
        let event = AlertsV1.AlertEvent(kind: .helpNowEscalated, requestId: id, from: names[alert.initiator], text: again, atMs: at, location: location)
        emit(event, to: record.recipients.filter { $0.answer == .pending && $0.user != 0 }.map(\.user))
        var own = event
        own.text = toInitiator
        emit(own, to: [alert.initiator])
        deliveryBell.ring()
        logger.notice("helpNow escalated: nobody accepted in time", metadata: ["alert": "\(id)", "resent": "\(resent)"])
        return true
    }

    /// The longest the maintenance loop sleeps between two passes (ms).
    static let maintenanceLongestWait: Int64 = 1_000

    /// Wakes the maintenance loop for work due at `dueMs` (an escalation, a timer, a watch's
    /// end), unless it wakes by then anyway (it sleeps a second at most). A pass reads six
    /// tables; ringing it on every helpNow ran one per raise under load, for an escalation five
    /// minutes away.
    func maintenanceDue(at dueMs: Int64) {
        if Self.wakesMaintenance(due: dueMs, wakeAt: maintenanceWakeAt.load(ordering: .sequentiallyConsistent), now: now()) {
            maintenanceBell.ring()
        }
    }

    /// Whether work due at `due` needs the loop before it wakes at `wakeAt` (0: a pass is under
    /// way). A pass under way may have read before the commit that made this work, and after it
    /// sleeps `maintenanceLongestWait` at most: rung only for work due sooner than that from now
    /// (later work is at most the rest of the pass late). Rung for all of it, a steady stream of
    /// raises kept the loop running pass after pass (`docs/benchmarks.md`, issue 16, item 151).
    static func wakesMaintenance(due: Int64, wakeAt: Int64, now: Int64) -> Bool {
        wakeAt == 0 ? due < now + maintenanceLongestWait : due < wakeAt
    }

    /// When the next active, unaccepted alert is due for escalation.
    func nextEscalationAt() async throws -> Int64? {
        let after = config.helpEscalation.wholeMilliseconds
        return try await store.oldestUnescalated().map { $0 + after }
    }
}
