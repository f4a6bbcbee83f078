import ArgumentParser
import Foundation
import FriensoClient
import FriensoProto
import Wire

// Check-in timers: `frienso timer start|end|status`.

func describe(_ t: AlertsV1.CheckInTimer) -> String {
    let state = switch t.state {
    case .active: t.warnedAtMs != 0 ? "RUNNING (your circle was warned)" : "running"
    case .ended: "ended \(formatTime(t.endedAtMs))"
    case .fired: "RAN OUT \(formatTime(t.endedAtMs)): helpNow \(t.alertId) was raised"
    default: "unknown"
    }
    return "check-in timer \(t.timerId): \(state); due \(formatTime(t.dueAtMs)), warning \(formatTime(t.warnAtMs))"
        + (t.note.isEmpty ? "" : "  “\(t.note)”") + (t.hasPin ? "  (PIN set)" : "")
        + (t.failedAttempts > 0 ? "  \(t.failedAttempts) wrong tries" : "")
}

struct TimerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "timer",
        abstract: "A check-in timer (\"expect me home by 23:10\"): if you do not end it in time, your circle is warned, then alerted (helpNow).",
        subcommands: [Start.self, End.self, Status.self], defaultSubcommand: Status.self)

    struct Start: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Start a timer: --minutes N, or --at HH:MM (your local time, the next such time).",
            discussion: "With --with-pin you choose a PIN (4-8 digits) that ends it as well as your password (asked for, or FRIENSO_PIN).")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var password: PasswordOptions
        @Option(help: "Minutes from now (5 to 1440).") var minutes: UInt32?
        @Option(help: "When you expect to be there, HH:MM in your local time.") var at: String?
        @Option(help: "A note for your circle (≤ 280 characters): where you go, with whom.") var note = ""
        @Flag(help: "Also allow ending it with a PIN.") var withPin = false

        func run() async throws {
            try await performCall(global) { client in
                var request = AlertsV1.StartTimerRequest(note: note)
                switch (minutes, at) {
                case (let m?, nil): request.minutes = m
                case (nil, let time?): request.dueAtMs = try Self.due(at: time)
                default: throw CLIError(message: "give --minutes or --at (one of them)", exitCode: 64)
                }
                if withPin { request.pin = try password.read("PIN (4-8 digits)", environment: "FRIENSO_PIN") }
                let reply = try await client.call(AlertsAPI.startTimer, request, mutation: true)
                return ((reply.timer.map(describe) ?? "") + "\nend it in time: frienso timer end", reply.jsonValue)
            }
        }

        /// The next HH:MM in the local time zone, as milliseconds since 1970.
        static func due(at time: String) throws -> Int64 {
            let parts = time.split(separator: ":").compactMap { Int($0) }
            guard parts.count == 2, (0..<24).contains(parts[0]), (0..<60).contains(parts[1]) else {
                throw CLIError(message: "--at: HH:MM, e.g. 23:10", exitCode: 64)
            }
            let calendar = Calendar.current
            let now = Date()
            guard let next = calendar.nextDate(after: now, matching: DateComponents(hour: parts[0], minute: parts[1]), matchingPolicy: .nextTime) else {
                throw CLIError(message: "--at: no such time", exitCode: 64)
            }
            return Int64(next.timeIntervalSince1970 * 1000)
        }
    }

    struct End: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "End your timer (you are safe): with your password, or --pin.")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var password: PasswordOptions
        @Flag(help: "Use the timer's PIN instead of your password (asked for, or FRIENSO_PIN).") var pin = false

        func run() async throws {
            try await performCall(global) { client in
                let request = pin ? AlertsV1.EndTimerRequest(pin: try password.read("PIN", environment: "FRIENSO_PIN"))
                                  : AlertsV1.EndTimerRequest(password: try password.read("Password"))
                let reply = try await client.call(AlertsAPI.endTimer, request, mutation: true)
                return (reply.timer.map(describe) ?? "", reply.jsonValue)
            }
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Your running timer, or the last one.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(AlertsAPI.getTimer, AlertsV1.GetTimerRequest())
                return (reply.timer.map(describe) ?? "you have not started a check-in timer", reply.jsonValue)
            }
        }
    }
}
