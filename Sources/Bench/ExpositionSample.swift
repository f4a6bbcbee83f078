import Foundation

/// One sample line of a Prometheus text exposition (`name{labels} value`), as `stack` reads the
/// launcher's merged metrics: its family's sample name, its labels and its value. Lines without
/// labels, comments and values that do not parse are skipped.
struct ExpositionSample {
    var name: Substring
    var labels: Substring
    var value: Double

    /// The samples of `exposition` whose name starts with one of `prefixes`.
    static func samples(_ exposition: String, prefixes: [String]) -> [ExpositionSample] {
        exposition.split(separator: "\n").compactMap { line in
            guard prefixes.contains(where: { line.hasPrefix($0) }),
                  let open = line.firstIndex(of: "{"), let close = line.lastIndex(of: "}"),
                  let value = Double(line[line.index(after: close)...].trimmingCharacters(in: .whitespaces)) else { return nil }
            return ExpositionSample(name: line[..<open], labels: line[line.index(after: open)..<close], value: value)
        }
    }

    /// `name`'s value among the labels, such as `service="geo",queue="service-database-writes"`
    /// (its values hold no quotes or commas: service names, queue labels, method names, statuses).
    func label(_ name: String) -> String? {
        for pair in labels.split(separator: ",") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[0] == name else { continue }
            return String(parts[1].trimmingCharacters(in: CharacterSet(charactersIn: "\"")))
        }
        return nil
    }
}
