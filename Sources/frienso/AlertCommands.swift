import ArgumentParser
import Foundation
import FriensoClient
import FriensoProto
import Wire

typealias AlertsAPI = AlertsV1.AlertsService

func personName(_ p: AlertsV1.Person?) -> String {
    guard let p else { return "?" }
    return p.username.isEmpty ? "user \(p.userId)" : p.username
}

extension AlertsV1.Answer {
    var label: String {
        switch self {
        case .pending: "not answered"
        case .accepted: "accepted"
        case .declined: "declined"
        default: protoName.lowercased()
        }
    }
}

func describe(_ s: AlertsV1.WatchSession) -> String {
    let state = s.state.protoName.dropFirst("WATCH_STATE_".count).lowercased()
    var lines = ["watch \(s.sessionId) of \(personName(s.initiator)): \(state), \(formatTime(s.startedAtMs)) until \(formatTime(s.endedAtMs != 0 ? s.endedAtMs : s.endsAtMs))"
                 + (s.note.isEmpty ? "" : "  “\(s.note)”")]
    for w in s.watchers { lines.append("  \(personName(w.person)): \(w.answer.label)") }
    return lines.joined(separator: "\n")
}

func describe(_ location: AlertsV1.AlertLocation?) -> String {
    guard let l = location, l.known else { return "location unknown" }
    return String(format: "%.5f, %.5f", l.latitude, l.longitude) + (l.placeName.isEmpty ? "" : " (near \(l.placeName))")
}

func describe(_ a: AlertsV1.HelpAlert) -> String {
    let state = a.state == .active ? "ACTIVE" : "resolved \(formatTime(a.resolvedAtMs)) by \(a.resolvedBy)"
    var lines = ["helpNow \(a.alertId) of \(personName(a.initiator)): \(state), raised \(formatTime(a.raisedAtMs)), \(describe(a.location))"
                 + (a.message.isEmpty ? "" : "  “\(a.message)”")]
    for r in a.recipients {
        let who = r.person.map(personName) ?? "\(r.phone) (invited, SMS)"
        let deliveries = r.deliveries.map { "\($0.channel.protoName.dropFirst("CHANNEL_".count).lowercased()) \($0.status.protoName.dropFirst("DELIVERY_STATUS_".count).lowercased())" }
        lines.append("  \(who): \(r.answer.label)" + (deliveries.isEmpty ? "" : "  [\(deliveries.joined(separator: ", "))]"))
    }
    if let e = a.emergency, !e.number.isEmpty {
        lines.append("  emergency prompt: \(e.label) \(e.number)" + (e.reported ? (e.dialed ? ", dialed" : ", not dialed") : ""))
    }
    if let x = a.escalation {
        lines.append("  ESCALATED \(formatTime(x.escalatedAtMs)): nobody accepted in time; sent again to \(x.resentTo); call \(x.label) \(x.number) at \(describe(x.location))")
    }
    return lines.joined(separator: "\n")
}

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Ask your core circle to watch you (walk home): start, extend, end, status.",
        subcommands: [Start.self, Extend.self, End.self, Status.self], defaultSubcommand: Status.self)

    struct Start: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Start a watch: every accepted member of your core circle is asked.")
        @OptionGroup var global: GlobalOptions
        @Option(help: "How long, in minutes (5 to 720).") var minutes: UInt32 = 30
        @Option(help: "A note for your watchers (≤ 280 characters).") var note = ""

        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(AlertsAPI.startWatch, AlertsV1.StartWatchRequest(durationSeconds: minutes * 60, note: note), mutation: true)
                return (reply.session.map(describe) ?? "", reply.jsonValue)
            }
        }
    }

    struct Extend: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add time to your active watch.")
        @OptionGroup var global: GlobalOptions
        @Option(help: "Minutes to add.") var minutes: UInt32 = 15

        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(AlertsAPI.extendWatch, AlertsV1.ExtendWatchRequest(extraSeconds: minutes * 60), mutation: true)
                return (reply.session.map(describe) ?? "", reply.jsonValue)
            }
        }
    }

    struct End: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "End your watch (you are safe); your watchers are told.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(AlertsAPI.endWatch, AlertsV1.EndWatchRequest(), mutation: true)
                return (reply.session.map(describe) ?? "", reply.jsonValue)
            }
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Your watch (who watches, who declined, who has not answered) and the ones you watch.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(AlertsAPI.getWatch, AlertsV1.GetWatchRequest())
                var lines = [reply.mine.map(describe) ?? "you have not started a watch"]
                lines += reply.watching.map { "you were asked to watch: " + describe($0) }
                return (lines.joined(separator: "\n"), reply.jsonValue)
            }
        }
    }
}

struct HelpNow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "help-now",
        abstract: "Raise a helpNow alert: your whole core circle gets push and SMS with your location at once.",
        discussion: "Retrying is safe: the alert is sent once. While one is active, raising again shows it.",
        subcommands: [Raise.self, Resolve.self, Status.self, Called.self], defaultSubcommand: Raise.self)

    struct Raise: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Raise the alert (the default).")
        @OptionGroup var global: GlobalOptions
        @Option(help: "What is happening (≤ 500 characters).") var message = ""
        @Option(parsing: .unconditional, help: "Where you are now (default: your last shared location).") var lat: Double?
        @Option(parsing: .unconditional) var lon: Double?
        @Option(help: "The accuracy of --lat/--lon, in metres.") var accuracy = 10.0

        func validate() throws {
            guard (lat == nil) == (lon == nil) else { throw ValidationError("give --lat and --lon together") }
        }

        func run() async throws {
            var request = AlertsV1.RaiseHelpNowRequest(message: message)
            if let lat, let lon {
                request.fix = AlertsV1.DeviceFix(latitude: lat, longitude: lon, accuracyM: accuracy, deviceTimeMs: WallClock.milliseconds())
            }
            try await performCall(global) { client in
                let reply = try await client.call(AlertsAPI.raiseHelpNow, request, mutation: true)
                var lines: [String] = []
                if reply.nobodyNotified {
                    lines.append("NOBODY WAS NOTIFIED: your core circle is empty. Call \(reply.alert?.emergency?.number ?? "911") now.")
                } else {
                    lines.append(reply.alreadyActive ? "your helpNow alert is already active" : "helpNow sent to \(reply.notified) people in your circle")
                }
                if let e = reply.alert?.emergency { lines.append("call \(e.label): \(e.number)   (then: frienso help-now called --dialed)") }
                if let a = reply.alert { lines.append(describe(a)) }
                return (lines.joined(separator: "\n"), reply.jsonValue)
            }
        }
    }

    struct Resolve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "You are safe: resolve your alert (an operator may resolve anyone's with --alert-id and the key).")
        @OptionGroup var global: GlobalOptions
        @Option(help: "The alert (default: your active one).") var alertId: UInt64 = 0
        @Option(help: "Operator key, to resolve someone else's alert.") var operatorKey = ""

        func run() async throws {
            try await performCall(global, requireSession: operatorKey.isEmpty) { client in
                let reply = try await client.call(AlertsAPI.resolveHelpNow, AlertsV1.ResolveHelpNowRequest(alertId: alertId, operatorKey: operatorKey),
                                                  mutation: true)
                return (reply.alert.map(describe) ?? "", reply.jsonValue)
            }
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Your alert (answers and deliveries) and the alerts of people whose circle you are in.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(AlertsAPI.getHelpNow, AlertsV1.GetHelpNowRequest())
                var lines = [reply.mine.map(describe) ?? "you have not raised a helpNow alert"]
                lines += reply.others.map { "someone in your circle needs help: " + describe($0) }
                return (lines.joined(separator: "\n"), reply.jsonValue)
            }
        }
    }

    struct Called: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Record whether you dialed the suggested emergency number.")
        @OptionGroup var global: GlobalOptions
        @Option(help: "The alert (default: your latest).") var alertId: UInt64 = 0
        @Flag(inversion: .prefixedNo, help: "Whether you dialed.") var dialed = true

        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(AlertsAPI.reportEmergencyCall, AlertsV1.ReportEmergencyCallRequest(alertId: alertId, dialed: dialed),
                                                  mutation: true)
                return ("recorded: \(dialed ? "dialed" : "did not dial") \(reply.emergency?.number ?? "")", reply.jsonValue)
            }
        }
    }
}

struct Inbox: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pending requests for you: watch, helpNow and coreFriend; accept, reject or dismiss them.",
        subcommands: [List.self, Accept.self, Reject.self, Dismiss.self], defaultSubcommand: List.self)

    enum Kind: String, ExpressibleByArgument, CaseIterable {
        case watch, helpNow = "help-now", coreFriend = "core-friend"
        var proto: AlertsV1.RequestKind {
            switch self {
            case .watch: .watch
            case .helpNow: .helpNow
            case .coreFriend: .coreFriend
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List pending requests (helpNow first).")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(AlertsAPI.listInbox, AlertsV1.ListInboxRequest())
                var lines = reply.items.map { item -> String in
                    let kind = Kind.allCases.first { $0.proto == item.kind }?.rawValue ?? item.kind.protoName
                    var line = "\(kind) \(item.requestId)  from \(personName(item.from))  \(formatTime(item.createdAtMs))"
                    if !item.text.isEmpty { line += "  “\(item.text)”" }
                    if item.kind == .helpNow { line += "  \(describe(item.location))" }
                    if item.kind == .watch { line += "  until \(formatTime(item.endsAtMs))" }
                    return line
                }
                if lines.isEmpty { lines = ["nothing pending"] }
                if reply.partial { lines.append("(coreFriend requests could not be read just now)") }
                return (lines.joined(separator: "\n"), reply.jsonValue)
            }
        }
    }

    static func respond(_ global: GlobalOptions, _ kind: Kind, _ id: UInt64, _ action: AlertsV1.InboxAction, done: String) async throws {
        try await performCall(global) { client in
            let reply = try await client.call(AlertsAPI.respondInbox, AlertsV1.RespondInboxRequest(kind: kind.proto, requestId: id, action: action),
                                              mutation: true)
            return (done, reply.jsonValue)
        }
    }

    struct Accept: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Accept: watch them, say you are on the way, or join their core circle.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "watch, help-now or core-friend") var kind: Kind
        @Argument(help: "The request id from `frienso inbox`.") var id: UInt64
        func run() async throws { try await respond(global, kind, id, .accept, done: "accepted") }
    }

    struct Reject: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Decline a request.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "watch, help-now or core-friend") var kind: Kind
        @Argument var id: UInt64
        func run() async throws { try await respond(global, kind, id, .reject, done: "declined") }
    }

    struct Dismiss: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Hide a request without answering.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "watch, help-now or core-friend") var kind: Kind
        @Argument var id: UInt64
        func run() async throws { try await respond(global, kind, id, .dismiss, done: "dismissed") }
    }
}

struct Devices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Devices that receive your push notifications.", subcommands: [List.self, Register.self, Unregister.self],
        defaultSubcommand: List.self)

    struct List: AsyncParsableCommand {
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(AlertsAPI.listDevices, AlertsV1.ListDevicesRequest())
                let lines = reply.devices.map { "\($0.platform.protoName.dropFirst("PLATFORM_".count).lowercased())  \($0.token)  \($0.appVersion)" }
                return (lines.isEmpty ? "no devices registered" : lines.joined(separator: "\n"), reply.jsonValue)
            }
        }
    }

    struct Register: AsyncParsableCommand {
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The device's push token.") var token: String
        @Option(help: "ios, android or web.") var platform = "ios"
        @Option var appVersion = ""

        func run() async throws {
            let platforms: [String: AlertsV1.Platform] = ["ios": .ios, "android": .android, "web": .web]
            guard let p = platforms[platform] else { throw ValidationError("--platform is ios, android or web") }
            try await performCall(global) { client in
                let reply = try await client.call(AlertsAPI.registerDevice, AlertsV1.RegisterDeviceRequest(token: token, platform: p, appVersion: appVersion),
                                                  mutation: true)
                return ("device registered", reply.jsonValue)
            }
        }
    }

    struct Unregister: AsyncParsableCommand {
        @OptionGroup var global: GlobalOptions
        @Argument var token: String
        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(AlertsAPI.unregisterDevice, AlertsV1.UnregisterDeviceRequest(token: token), mutation: true)
                return ("device unregistered", reply.jsonValue)
            }
        }
    }
}

struct Outbox: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Operator: the delivery outbox (push and SMS records), newest first, with each attempt.",
        discussion: """
            Authorised by the deployment's operator key (FRIENSO_OPERATOR_KEY or --operator-key), not by a login. Each delivery shows \
            its provider, the provider's message id once delivered, its last error, and every attempt (when, the provider's answer, \
            its Retry-After). An attempt "interrupted" means alerts stopped before the provider answered: the message may have gone \
            out, and was sent again with the same key.
            """)

    static func time(_ ms: Int64) -> String {
        let format = DateFormatter()
        format.dateFormat = "yyyy-MM-dd HH:mm:ss"
        format.timeZone = TimeZone(identifier: "UTC")
        return format.string(from: Date(timeIntervalSince1970: Double(ms) / 1000)) + "Z"
    }
    @OptionGroup var global: GlobalOptions
    @Option(help: "The operator key (default: $FRIENSO_OPERATOR_KEY).") var operatorKey: String?
    @Option(help: "pending, delivered, failed or skipped.") var status: String?
    @Option(help: "Only this recipient's.") var user: UInt64 = 0
    @Option(help: "How many (1-500).") var limit: UInt32 = 50

    func run() async throws {
        let statuses: [String: AlertsV1.DeliveryStatus] = ["pending": .pending, "delivered": .delivered, "failed": .failed, "skipped": .skipped]
        var wanted = AlertsV1.DeliveryStatus.unspecified
        if let status {
            guard let s = statuses[status] else { throw ValidationError("--status is pending, delivered, failed or skipped") }
            wanted = s
        }
        let key = operatorKey ?? ProcessInfo.processInfo.environment["FRIENSO_OPERATOR_KEY"] ?? ""
        try await performCall(global, requireSession: false) { client in
            let reply = try await client.call(AlertsAPI.listOutbox, AlertsV1.ListOutboxRequest(operatorKey: key, status: wanted, recipientUserId: user,
                                                                                              limit: limit))
            let lines = reply.deliveries.map { d in
                "\(d.deliveryId)  \(d.source)  \(d.channel.protoName.dropFirst("CHANNEL_".count).lowercased())  "
                    + "\(d.status.protoName.dropFirst("DELIVERY_STATUS_".count).lowercased()) ×\(d.attempts)  to \(d.recipientUserId == 0 ? d.address : "user \(d.recipientUserId) (\(d.address))")"
                    + (d.provider.isEmpty ? "" : "  via \(d.provider)") + (d.reference.isEmpty ? "" : "  id \(d.reference)")
                    + (d.lastError.isEmpty ? "" : "  (\(d.lastError))") + "  “\(d.body)”"
                    + d.attemptLog.map { a in "\n    attempt \(a.attempt)  \(Self.time(a.startedAtMs))  \(a.provider)  "
                        + a.outcome.protoName.dropFirst("ATTEMPT_OUTCOME_".count).lowercased().replacingOccurrences(of: "_", with: " ")
                        + (a.reference.isEmpty ? "" : "  id \(a.reference)") + (a.error.isEmpty ? "" : "  \(a.error)")
                        + (a.retryAfterMs > 0 ? "  (retry after \(a.retryAfterMs / 1000) s)" : "") }.joined()
            }
            return (lines.isEmpty ? "the outbox is empty" : lines.joined(separator: "\n"), reply.jsonValue)
        }
    }
}

struct Resources: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Campus safety resources (phone numbers, links).", subcommands: [List.self, Import.self], defaultSubcommand: List.self)

    struct List: AsyncParsableCommand {
        @OptionGroup var global: GlobalOptions
        @Option(help: "Only this campus.") var campus = ""
        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(AlertsAPI.listResources, AlertsV1.ListResourcesRequest(campus: campus))
                let lines = reply.resources.map { r in
                    ["\(r.campus): \(r.title)", r.phone, r.url, r.detail].filter { !$0.isEmpty }.joined(separator: "  ")
                }
                return (lines.isEmpty ? "no resources: an operator imports them (frienso resources import)" : lines.joined(separator: "\n"), reply.jsonValue)
            }
        }
    }

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Operator: replace campus resources from a JSON file.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "JSON: [{\"campus\", \"title\", \"detail\", \"phone\", \"url\"}, ...]") var file: String
        @Option(help: "The campus, when the entries do not name it.") var campus = ""
        @Option(help: "The operator key (default: $FRIENSO_OPERATOR_KEY).") var operatorKey: String?

        func run() async throws {
            guard let data = FileManager.default.contents(atPath: file) else { throw ValidationError("cannot read \(file)") }
            let key = operatorKey ?? ProcessInfo.processInfo.environment["FRIENSO_OPERATOR_KEY"] ?? ""
            try await performCall(global, requireSession: false) { client in
                let reply = try await client.call(AlertsAPI.importResources, AlertsV1.ImportResourcesRequest(operatorKey: key, campus: campus, data: Array(data)),
                                                  mutation: true)
                return ("imported \(reply.imported) resources for \(reply.campuses.joined(separator: ", "))", reply.jsonValue)
            }
        }
    }
}
