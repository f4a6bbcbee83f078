import Foundation
import FriensoProto
import GRDB
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
        let due = try await store.database.read { db in
            try UInt64.fetchAll(db, sql: """
                SELECT id FROM help_alerts a WHERE state = 1 AND escalated_at_ms = 0 AND raised_at_ms <= ?
                  AND NOT EXISTS (SELECT 1 FROM recipients r WHERE r.alert_id = a.id AND r.answer = ?)
                ORDER BY id
                """, arguments: [cutoff, AlertsV1.Answer.accepted.rawValue])
        }
        var escalated = 0
        for id in due where try await escalate(id, at: at) { escalated += 1 }
        return escalated
    }

    private func escalate(_ id: UInt64, at: Int64) async throws -> Bool {
        guard let alert = try await store.alert(id: id) else { return false }
        // Where the person is now (they may have moved since the alert); the alert's place if geo cannot say.
        var located = alert.location
        if let now = try? await peers.latestLocation(of: alert.initiator), now.known { located = now }
        let location = located
        let users = alert.recipients.map(\.user).filter { $0 != 0 }
        let names = await people(Set(users + [alert.initiator]))
        let number = config.campusPoliceNumber.isEmpty ? config.emergencyNumber : config.campusPoliceNumber
        let label = config.campusPoliceNumber.isEmpty ? config.emergencyLabel : config.campusPoliceLabel
        let again = "STILL NO ANSWER: " + Self.helpText(names[alert.initiator], alert.message, location)
        let toInitiator = "Nobody in your circle has said they are on the way yet. Call \(label) now: \(number)."
        let result = try await store.database.write { db -> (AlertRecord, UInt32)? in
            try db.run(sql: """
                UPDATE help_alerts SET escalated_at_ms = ? WHERE id = ? AND state = 1 AND escalated_at_ms = 0
                  AND NOT EXISTS (SELECT 1 FROM recipients r WHERE r.alert_id = help_alerts.id AND r.answer = ?)
                """, arguments: [at, id, AlertsV1.Answer.accepted.rawValue])
            guard db.changesCount == 1, let current = try AlertsStore.alert(db, id: id) else { return nil }
            let silent = current.recipients.filter { $0.answer == .pending }
            try db.run(sql: "INSERT INTO escalations (alert_id, number, label, location, created_at_ms, resent_to) VALUES (?, ?, ?, ?, ?, ?)",
                       arguments: [id, number, label, Data(location.serializedBytes()), at, silent.count])
            try AlertsStore.enqueue(db, silent.map { r in
                r.user != 0 ? Outgoing(source: "help_now_resend:\(id)", recipient: .user(r.user), channels: [.push, .sms], body: again, about: current.initiator)
                            : Outgoing(source: "help_now_resend:\(id)", recipient: .phone(r.phone), channels: [.sms], body: again, about: current.initiator)
            } + [Outgoing(source: "help_now_escalated:\(id)", recipient: .user(current.initiator), channels: [.push], body: toInitiator,
                          about: current.initiator)], now: at)
            guard let record = try AlertsStore.alert(db, id: id) else { return nil }
            return (record, UInt32(silent.count))
        }
        guard let (record, resent) = result else { return false }
        let event = AlertsV1.AlertEvent(kind: .helpNowEscalated, requestId: id, from: names[alert.initiator], text: again, atMs: at, location: location)
        emit(event, to: record.recipients.filter { $0.answer == .pending && $0.user != 0 }.map(\.user))
        var own = event
        own.text = toInitiator
        emit(own, to: [alert.initiator])
        deliveryBell.ring()
        logger.notice("helpNow escalated: nobody accepted in time", metadata: ["alert": "\(id)", "resent": "\(resent)"])
        return true
    }

    /// When the next active, unaccepted alert is due for escalation.
    func nextEscalationAt() async throws -> Int64? {
        let after = config.helpEscalation.wholeMilliseconds
        return try await store.database.read { db in
            try Int64.fetchOne(db, sql: "SELECT MIN(raised_at_ms) FROM help_alerts WHERE state = 1 AND escalated_at_ms = 0")
        }.map { $0 + after }
    }
}

extension AlertsStore {
    static func migrateEscalation(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("escalation") { db in
            try db.execute(sql: """
                ALTER TABLE help_alerts ADD COLUMN escalated_at_ms INTEGER NOT NULL DEFAULT 0;
                CREATE TABLE escalations (
                    alert_id INTEGER PRIMARY KEY REFERENCES help_alerts(id), number TEXT NOT NULL, label TEXT NOT NULL, location BLOB NOT NULL,
                    created_at_ms INTEGER NOT NULL, resent_to INTEGER NOT NULL
                );
                """)
        }
    }

    static func escalation(_ db: Database, alert id: UInt64) throws -> AlertsV1.Escalation? {
        try Row.fetchOne(db, cached: "SELECT number, label, location, created_at_ms, resent_to FROM escalations WHERE alert_id = ?", arguments: [id]).map {
            AlertsV1.Escalation(escalatedAtMs: $0[3], number: $0[0], label: $0[1],
                                location: (try? AlertsV1.AlertLocation(serializedBytes: Array($0[2] as Data))) ?? AlertsV1.AlertLocation(),
                                resentTo: $0[4])
        }
    }
}
