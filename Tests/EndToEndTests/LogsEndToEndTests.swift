import Foundation
import FriensoClient
import FriensoProto
import FriensoTesting
import Launcher
import Testing
import Wire

/// Logs a machine can read (issue 20, item 5): the launched deployment with `logFormat: json`
/// writes one JSON object per line in every member's log, lines logged while serving a request
/// carry its id and method, and the launcher rotates each log by size.
@Suite("end to end: JSON logs and rotation", .serialized, .timeLimit(.minutes(4)))
struct LogsEndToEndTests {
    static func lines(_ path: String) -> [String] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    @Test func everyLineIsAJSONObject_requestLinesNameTheirRequest_andLogsRotateBySize() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let stack = try await LaunchedStack(procs) { config in
            config.logFormat = "json"
            config.logLevel = "trace"
            config.logMaxBytes = 16_384
            config.logKeep = 2
        }
        defer { stack.shutdown() }
        try await stack.showingLogsOnFailure {
            let ana = try await makeActor(stack, "ana", number: 950)
            let ben = try await makeActor(stack, "ben", number: 951)
            try await befriend(ana, ben)
            let logs = "\(stack.run)/logs"
            // Traffic until some member's log has been rotated at least twice.
            try await eventually("a log rotated twice", timeout: .seconds(60)) {
                for step in 0..<20 {
                    _ = try await ana.client.call(GeoV1.GeoService.updateLocation, GeoV1.UpdateLocationRequest(
                        latitude: 33.78 + Double(step) * 1e-5, longitude: -118.11, accuracyM: 5, deviceTimeMs: WallClock.milliseconds()), mutation: true)
                    _ = try await ben.client.call(GeoV1.GeoService.friendsLocations, GeoV1.FriendsLocationsRequest())
                }
                return FileManager.default.fileExists(atPath: "\(logs)/geo.log.2") || FileManager.default.fileExists(atPath: "\(logs)/gateway.log.2")
            }
            let files = try FileManager.default.contentsOfDirectory(atPath: logs).sorted()
            #expect(!files.contains { $0.hasSuffix(".log.3") }, "logKeep 2: no third old file: \(files)")
            var requestLines = 0, withUser = 0
            for file in files {
                let path = "\(logs)/\(file)"
                if file.contains(".log.") {
                    let size = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
                    // Rotated because it passed the limit (checked every 5 s, so it may hold more).
                    #expect(size > 16_384, "\(file) \(size)")
                }
                for line in Self.lines(path) {
                    guard let object = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] else {
                        Issue.record("not a JSON object in \(file): \(line.prefix(200))")
                        continue
                    }
                    #expect(object["ts"] is String && object["level"] is String && object["msg"] is String && object["label"] is String, "\(line)")
                    if object["request-id"] != nil, object["method"] != nil { requestLines += 1 }
                    if object["user-id"] != nil { withUser += 1 }
                }
            }
            #expect(requestLines > 0, "lines logged while serving a request carry its id and method")
            #expect(withUser > 0, "at trace, the caller's user id is there")
        }
    }

    @Test func statusFindsTheLastErrorInAJSONLog_asInATextOne() throws {
        let dir = try TemporaryDirectory("frienso-logs")
        defer { dir.remove() }
        let path = "\(dir.path)/geo.log"
        try """
            {"ts":"2026-11-24T00:30:01.123Z","level":"info","label":"frienso","msg":"listening","source":"Wire"}
            {"ts":"2026-11-24T00:30:02.456Z","level":"error","label":"frienso","msg":"audit flush failed; kept for the next one","source":"Geo","error":"disk full"}
            {"ts":"2026-11-24T00:30:03.789Z","level":"warning","label":"frienso","msg":"slow commit","source":"Storage"}

            """.write(toFile: path, atomically: true, encoding: .utf8)
        #expect(LaunchStatus.lastError(inLog: path) == "2026-11-24T00:30:02.456Z error audit flush failed; kept for the next one (error: disk full)")
        try "2026-11-24T00:31:00+0000 critical frienso : [Geo] the database cannot be opened\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(LaunchStatus.lastError(inLog: path) == "2026-11-24T00:31:00+0000 critical frienso : [Geo] the database cannot be opened")
    }
}
