import ArgumentParser
import Foundation
import FriensoClient
import FriensoProto
import Wire

/// `frienso events`: every live event for the caller (geo, social and alerts alike).
struct Events: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stream live events (pokes, friends' locations, friends nearby, watch and helpNow alerts, requests) until interrupted.")
    @OptionGroup var global: GlobalOptions
    @Option(help: "Stop after this many events (default: run until interrupted).") var count: Int?

    func run() async throws {
        try await perform(global) {
            let client = try global.client(requireSession: true)
            let stream = try await client.events()
            // On stderr, so `--json` output stays one event a line: from here on nothing is missed.
            FileHandle.standardError.write(Data("listening for live events (Ctrl-C to stop)\n".utf8))
            var seen = 0
            for await envelope in stream {
                FileHandle.standardOutput.write(Data((Self.describe(envelope, json: global.json) + "\n").utf8))
                seen += 1
                if let count, seen >= count { break }
            }
            await client.close()
            return ("", .null)
        }
    }

    static func describe(_ e: Envelope, json: Bool) -> String {
        switch e.method {
        case "geo.Location":
            guard let m = try? GeoV1.LocationEvent(serializedBytes: e.payload) else { break }
            if m.precision == .hidden { return json ? m.jsonValue.rendered(indent: 0) : "location  user \(m.userId) is out of sight now" }
            let at = m.fix.map { String(format: "%.5f, %.5f", $0.latitude, $0.longitude) + (m.precision == .approximate ? " (approximate)" : "") }
                ?? (m.around.isEmpty ? "a place they do not name" : m.around)
            return json ? m.jsonValue.rendered(indent: 0) : "location  user \(m.userId) at \(at)\(m.status.isEmpty ? "" : "  “\(m.status)”")"
        case "geo.FriendNearby":
            guard let m = try? GeoV1.FriendNearbyEvent(serializedBytes: e.payload) else { break }
            return json ? m.jsonValue.rendered(indent: 0) : "nearby    user \(m.userId) is \(metres(m.distanceM)) away"
        case "geo.PlaceAlert":
            guard let m = try? GeoV1.PlaceAlertEvent(serializedBytes: e.payload) else { break }
            return json ? m.jsonValue.rendered(indent: 0) : "place     user \(m.subjectId) \(m.arrived ? "arrived at" : "left") \(m.label)"
        case "social.Poke":
            guard let m = try? SocialV1.Poke(serializedBytes: e.payload) else { break }
            return json ? m.jsonValue.rendered(indent: 0) : "poke      from \(m.from?.username ?? "?")"
        case "alerts.Event":
            guard let m = try? AlertsV1.AlertEvent(serializedBytes: e.payload) else { break }
            let tag = m.kind == .helpNow ? "HELP NOW" : "alert   "
            return json ? m.jsonValue.rendered(indent: 0) : "\(tag)  \(m.text)"
        default: break
        }
        return "event     \(e.method) (\(e.payload.count) bytes)"
    }
}
