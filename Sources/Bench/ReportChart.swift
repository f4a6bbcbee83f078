import Foundation

/// Draws the JSON results of `frienso-bench` runs as SVG charts, one per scenario: requests a
/// second and p50/p99 latency for every measured row (path × in flight), one bar per run, so
/// runs of the same scenario given together read as before/after; then the run-level figures
/// (ops/s, CPU µs per operation). Plain SVG written here: a chart is a few rectangles and
/// labels, and no listed package draws charts.
public enum ReportChart {
    public static func load(_ paths: [String]) throws -> [Results.File] {
        try paths.map { try JSONDecoder().decode(Results.File.self, from: Data(contentsOf: URL(fileURLWithPath: $0))) }
    }

    /// Draws the results in `paths` into `directory`. - Returns: the SVG files written.
    public static func write(_ paths: [String], to directory: String) throws -> [String] {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return try charts(try load(paths)).sorted { $0.key < $1.key }.map { name, svg in
            try svg.write(toFile: "\(directory)/\(name)", atomically: true, encoding: .utf8)
            return "\(directory)/\(name)"
        }
    }

    /// - Returns: file name → SVG text, one per scenario.
    public static func charts(_ files: [Results.File]) -> [String: String] {
        var byScenario: [String: [Results.File]] = [:]
        for file in files { byScenario[file.scenario, default: []].append(file) }
        return Dictionary(uniqueKeysWithValues: byScenario.map { scenario, runs in ("\(scenario).svg", chart(scenario, runs)) })
    }

    struct Bar { var label: String; var run: Int; var value: Double }

    static let palette = ["#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#9D755D", "#BAB0AC"]

    static func chart(_ scenario: String, _ runs: [Results.File]) -> String {
        // Every row of every run, keyed by section, path and in-flight level, in first-seen order.
        var keys: [String] = []
        var values: [String: [Int: Results.Row]] = [:]
        var metricKeys: [String] = []
        var metrics: [String: [Int: Double]] = [:]
        for (r, run) in runs.enumerated() {
            for table in run.tables {
                for row in table.rows {
                    let key = (table.section.isEmpty ? "" : "\(table.section): ") + "\(row.name) @\(row.inFlight)"
                    if values[key] == nil { keys.append(key) }
                    values[key, default: [:]][r] = row
                }
                for (name, value) in table.metrics.sorted(by: { $0.key < $1.key }) {
                    let key = (table.section.isEmpty ? "" : "\(table.section): ") + name
                    if metrics[key] == nil { metricKeys.append(key) }
                    metrics[key, default: [:]][r] = value
                }
            }
        }
        // A path no run measured (an operation the mix left out) draws nothing worth reading.
        keys.removeAll { key in values[key]?.values.allSatisfy { $0.requests == 0 } ?? true }
        var panels: [Panel] = []
        panels.append(Panel(title: "requests a second (higher is better)", unit: "/s", groups: keys.map { key in
            (key, runs.indices.compactMap { r in values[key]?[r].map { Bar(label: runs[r].label, run: r, value: $0.perSecond) } })
        }))
        panels.append(Panel(title: "latency p50 (solid) and p99 (light), µs (lower is better)", unit: "µs", groups: keys.map { key in
            (key, runs.indices.flatMap { r -> [Bar] in
                guard let row = values[key]?[r] else { return [] }
                return [Bar(label: "p50", run: r, value: row.p50Us), Bar(label: "p99", run: r, value: row.p99Us)]
            })
        }))
        // A figure that was 0 in every run (a process the mix left idle, no major faults) is
        // counted in a note, not drawn: a stack run has about a hundred figures, and bars of
        // nothing made most of its chart.
        let zero = metricKeys.filter { key in metrics[key]?.values.allSatisfy { $0 == 0 } ?? true }
        metricKeys.removeAll { zero.contains($0) }
        if !metricKeys.isEmpty {
            // Each figure has its own unit (µs, ops/s, MiB): each is scaled on its own.
            panels.append(Panel(title: "run figures (each on its own scale)", unit: "", groups: metricKeys.map { key in
                (key, runs.indices.compactMap { r in metrics[key]?[r].map { Bar(label: runs[r].label, run: r, value: $0) } })
            }, scalePerGroup: true, note: zero.isEmpty ? nil
                : "\(zero.count) more \(zero.count == 1 ? "figure was" : "figures were") 0 in every run: \(zero.joined(separator: ", "))"))
        }
        return svg(title: "frienso-bench \(scenario)", runs: runs.map(\.label), commands: Array(Set(runs.map(\.command))).sorted(), panels: panels)
    }

    struct Panel {
        var title: String
        var unit: String
        var groups: [(String, [Bar])]
        var scalePerGroup = false
        /// A line under the title (what the panel leaves out).
        var note: String? = nil
    }

    static func svg(title: String, runs: [String], commands: [String], panels: [Panel]) -> String {
        let width = 960.0, labelWidth = 330.0, barHeight = 12.0, gap = 10.0
        var y = 30.0
        var body: [String] = []
        body.append(text(10, y, title, size: 16, bold: true))
        y += 18
        for command in commands { body.append(text(10, y, command, size: 11, fill: "#555")); y += 14 }
        // The legend, four runs a row.
        for (i, run) in runs.enumerated() {
            let x = 10 + Double(i % 4) * 235, rowY = y + Double(i / 4) * 16
            body.append("<rect x=\"\(x)\" y=\"\(rowY)\" width=\"10\" height=\"10\" fill=\"\(palette[i % palette.count])\"/>")
            body.append(text(x + 14, rowY + 9, run, size: 11))
        }
        y += Double((runs.count + 3) / 4) * 16 + 10
        for panel in panels where !panel.groups.isEmpty {
            body.append(text(10, y, panel.title, size: 13, bold: true))
            if let note = panel.note {
                // Wrapped at about 150 characters a line: SVG text does not wrap itself.
                for line in wrap(note, width: 150) { y += 14; body.append(text(10, y, line, size: 10, fill: "#555")) }
            }
            y += 10
            let top = panel.groups.flatMap { $0.1.map(\.value) }.max() ?? 1
            for (label, bars) in panel.groups {
                let groupMax = panel.scalePerGroup ? (bars.map(\.value).max() ?? 1) : top
                let scale = (width - labelWidth - 90) / max(groupMax, 1e-9)
                let groupTop = y
                for bar in bars {
                    let w = max(1, bar.value * scale)
                    let light = bar.label == "p99"
                    body.append("<rect x=\"\(labelWidth)\" y=\"\(y)\" width=\"\(fmt(w))\" height=\"\(barHeight)\" fill=\"\(palette[bar.run % palette.count])\" fill-opacity=\"\(light ? "0.45" : "1")\"/>")
                    body.append(text(labelWidth + w + 4, y + 10, "\(number(bar.value))\(panel.unit.isEmpty ? "" : " " + panel.unit)", size: 10))
                    y += barHeight + 2
                }
                body.append(text(labelWidth - 6, (groupTop + y) / 2 + 4, label, size: 11, anchor: "end"))
                y += gap
            }
            y += 14
        }
        return """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(y + 10))" viewBox="0 0 \(Int(width)) \(Int(y + 10))" font-family="sans-serif">
            <rect width="100%" height="100%" fill="white"/>
            \(body.joined(separator: "\n"))
            </svg>

            """
    }

    static func text(_ x: Double, _ y: Double, _ s: String, size: Int, bold: Bool = false, fill: String = "#222", anchor: String = "start") -> String {
        "<text x=\"\(fmt(x))\" y=\"\(fmt(y))\" font-size=\"\(size)\"\(bold ? " font-weight=\"bold\"" : "") fill=\"\(fill)\" text-anchor=\"\(anchor)\">\(escape(s))</text>"
    }

    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }

    static func fmt(_ v: Double) -> String { String(format: "%.1f", v) }

    /// A bar's figure, to the digits that tell runs apart: whole numbers with thousands
    /// separators from 100 up, one decimal from 10, two from 1, and three significant digits
    /// under 1 (commits per operation are 0.04–0.08: "%.1f" printed every one of them as 0.0).
    /// Not `NumberFormatter`: the chart must read the same whatever the machine's locale.
    static func number(_ v: Double) -> String {
        guard v.isFinite else { return "\(v)" }
        let magnitude = abs(v)
        if magnitude >= 100 {
            let digits = String(Int64(magnitude.rounded()))
            var grouped = ""
            for (i, digit) in digits.enumerated() {
                if i > 0, (digits.count - i) % 3 == 0 { grouped += "," }
                grouped.append(digit)
            }
            return (v < 0 ? "-" : "") + grouped
        }
        if magnitude >= 10 { return String(format: "%.1f", v) }
        if magnitude >= 1 { return String(format: "%.2f", v) }
        if magnitude == 0 { return "0" }
        let decimals = min(9, 2 - Int(log10(magnitude).rounded(.down)))
        var text = String(format: "%.\(decimals)f", v)
        while text.hasSuffix("0") { text.removeLast() }
        return text
    }

    /// `s` in lines of at most `width` characters, broken at spaces (a word longer than that
    /// stays whole on its own line).
    static func wrap(_ s: String, width: Int) -> [String] {
        var lines: [String] = [], line = ""
        for word in s.split(separator: " ", omittingEmptySubsequences: true) {
            if !line.isEmpty, line.count + 1 + word.count > width { lines.append(line); line = "" }
            line += (line.isEmpty ? "" : " ") + word
        }
        if !line.isEmpty { lines.append(line) }
        return lines
    }
}
