import Foundation
import Logging
import ServiceKit
import Synchronization
import Testing

@Suite("logs: the JSON format")
struct JSONLogHandlerTests {
    final class Lines: Sendable {
        let all = Mutex<[String]>([])
        var write: @Sendable (String) -> Void { { line in self.all.withLock { $0.append(line) } } }
        var objects: [[String: Any]] {
            all.withLock { $0 }.compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
        }
    }

    @Test func oneObjectPerLine_withItsFields_escaped_andPersonalMetadataOnlyAtDebug() {
        for (level, personal) in [(Logger.Level.info, false), (.debug, true)] {
            let lines = Lines()
            var logger = Logger(label: "frienso") { JSONLogHandler(label: $0, level: level, write: lines.write) }
            logger[metadataKey: "member"] = "alerts"
            logger.notice("helpNow \"raised\"\nsecond line\u{1}", metadata: ["user": "7", "alert": "3", "list": ["a", "b"], "map": ["k": "v"]])
            logger.trace("never at this level")
            let raw = lines.all.withLock { $0 }
            #expect(raw.count == 1 && raw[0].hasSuffix("}\n") && raw[0].dropLast().firstIndex(of: "\n") == nil, "one line: \(raw)")
            let object = lines.objects.first ?? [:]
            #expect(object["msg"] as? String == "helpNow \"raised\"\nsecond line\u{1}")
            #expect(object["level"] as? String == "notice" && object["label"] as? String == "frienso" && object["member"] as? String == "alerts")
            #expect(object["alert"] as? String == "3" && object["list"] as? [String] == ["a", "b"] && (object["map"] as? [String: String]) == ["k": "v"])
            #expect((object["ts"] as? String)?.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"#, options: .regularExpression) != nil)
            #expect((object["user"] != nil) == personal, "the user id only at debug: \(level)")
        }
    }
}
