/// Merges Prometheus text expositions (format 0.0.4) into one: the format allows one `# HELP` and
/// one `# TYPE` line per metric family and wants a family's samples together, so members' outputs
/// cannot simply be concatenated when they share metric names (every member has
/// `frienso_requests_total`, told apart by its `service` label). Families keep the order they were
/// first seen in; a family's samples keep their order, member after member.
public enum PrometheusText {
    private struct Family {
        var help: String?
        var type: String?
        var samples: [Substring] = []
    }

    /// - Parameter help: help text for families that arrive without one.
    public static func merge(_ expositions: [String], help: [String: String] = [:]) -> String {
        var order: [String] = []
        var families: [String: Family] = [:]
        func family(_ name: String) -> String {
            if families[name] == nil {
                families[name] = Family()
                order.append(name)
            }
            return name
        }
        for text in expositions {
            var current: String?
            for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
                if line.hasPrefix("#") {
                    let parts = line.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: true)
                    guard parts.count >= 3, parts[1] == "HELP" || parts[1] == "TYPE" else { continue } // a comment
                    let name = family(String(parts[2]))
                    current = name
                    if parts[1] == "HELP", families[name]?.help == nil { families[name]?.help = String(line) }
                    if parts[1] == "TYPE", families[name]?.type == nil { families[name]?.type = String(line) }
                    continue
                }
                let sampleName = String(line.prefix { $0 != "{" && $0 != " " })
                // A histogram's or summary's `_bucket`, `_sum` and `_count` belong to the family announced.
                if let current, sampleName == current || (sampleName.hasPrefix(current + "_")
                    && ["_bucket", "_sum", "_count", "_created"].contains(String(sampleName.dropFirst(current.count)))) {
                    families[current]?.samples.append(line)
                } else {
                    current = nil
                    families[family(sampleName)]?.samples.append(line)
                }
            }
        }
        var out = ""
        out.reserveCapacity(expositions.reduce(0) { $0 + $1.utf8.count })
        for name in order {
            guard let f = families[name] else { continue }
            if let line = f.help {
                out += line + "\n"
            } else if let text = help[name] {
                out += "# HELP \(name) \(text)\n"
            }
            if let type = f.type { out += type + "\n" }
            for sample in f.samples { out += sample + "\n" }
        }
        return out
    }

    /// A label value escaped as the format wants (backslash, double quote, newline).
    public static func escape(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }
}
