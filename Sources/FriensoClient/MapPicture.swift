import Foundation

/// Something to draw on the map.
public struct MapMark: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case you
        case friend
        case checkIn
        /// A venue: how many people are there (or, with `fewerThan` set, fewer than that: the
        /// total is withheld), how many of them your friends, and how far "at it" reaches.
        case venue(people: Int, friends: Int, radiusMetres: Double, fewerThan: Int = 0)
    }

    public var kind: Kind
    public var latitude: Double
    public var longitude: Double
    public var label: String

    public init(_ kind: Kind, latitude: Double, longitude: Double, label: String) {
        self.kind = kind
        self.latitude = latitude
        self.longitude = longitude
        self.label = label
    }
}

/// Draws marks as an SVG picture: a local flat projection around the first mark (or the centre
/// of all), north up, a scale bar with a round length, a north arrow, labels and a legend.
/// Pure: no I/O, so the same marks always give the same picture.
public enum MapPicture {
    static let metresPerDegreeLatitude = 110_540.0
    static let metresPerDegreeLongitudeAtEquator = 111_320.0

    public static func svg(_ marks: [MapMark], width: Int = 900, height: Int = 640, title: String = "Frienso map") -> String {
        let w = Double(width), h = Double(height)
        let margin = 70.0, legendHeight = 46.0
        // Centre: you when you are on the map, else the middle of everything.
        let centre: (lat: Double, lon: Double) = marks.first { $0.kind == .you }.map { ($0.latitude, $0.longitude) }
            ?? (marks.isEmpty ? (0, 0) : (marks.map(\.latitude).reduce(0, +) / Double(marks.count), marks.map(\.longitude).reduce(0, +) / Double(marks.count)))
        let lonScale = metresPerDegreeLongitudeAtEquator * cos(centre.lat * .pi / 180)
        func local(_ m: MapMark) -> (x: Double, y: Double) {
            ((m.longitude - centre.lon) * lonScale, (m.latitude - centre.lat) * metresPerDegreeLatitude)
        }
        // The extent: every mark (venues with their reach) and at least 250 m around the centre.
        var reach = 250.0
        for m in marks {
            let p = local(m)
            var extra = 0.0
            if case .venue(_, _, let r, _) = m.kind { extra = r }
            reach = max(reach, abs(p.x) + extra, abs(p.y) + extra)
        }
        reach *= 1.1
        let drawable = min(w - 2 * margin, h - 2 * margin - legendHeight)
        let pxPerMetre = drawable / (2 * reach)
        let cx = w / 2, cy = (h - legendHeight) / 2
        func screen(_ m: MapMark) -> (x: Double, y: Double) {
            let p = local(m)
            return (cx + p.x * pxPerMetre, cy - p.y * pxPerMetre)
        }

        var svg: [String] = []
        svg.append("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(width)\" height=\"\(height)\" viewBox=\"0 0 \(width) \(height)\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">")
        svg.append("<title>\(escape(title))</title>")
        svg.append("<rect width=\"100%\" height=\"100%\" fill=\"#f4f1ea\"/>")
        // A light grid at the scale bar's length.
        let bar = roundLength(reach * 2 / 5)
        let step = bar * pxPerMetre
        if step > 8 {
            var lines: [String] = []
            var x = cx.truncatingRemainder(dividingBy: step)
            while x < w { lines.append("M\(f(x)) 0V\(f(h - legendHeight))"); x += step }
            var y = cy.truncatingRemainder(dividingBy: step)
            while y < h - legendHeight { lines.append("M0 \(f(y))H\(f(w))"); y += step }
            svg.append("<path d=\"\(lines.joined())\" stroke=\"#e2ddd0\" stroke-width=\"1\"/>")
        }
        // Venues first (underneath), then check-ins, friends, you.
        for m in marks {
            guard case .venue(let people, let friends, let radius, let fewerThan) = m.kind else { continue }
            let p = screen(m)
            let r = max(6, radius * pxPerMetre)
            svg.append("<circle cx=\"\(f(p.x))\" cy=\"\(f(p.y))\" r=\"\(f(r))\" fill=\"#f2b134\" fill-opacity=\"0.25\" stroke=\"#c98a0b\" stroke-width=\"1.5\"/>")
            let total = fewerThan > 0 ? "fewer than \(fewerThan)" : "\(people)"
            let count = friends > 0 ? "\(total) here, \(friends) friend\(friends == 1 ? "" : "s")" : "\(total) here"
            svg.append(text(m.label, x: p.x, y: p.y - r - 16, size: 13, weight: "bold", colour: "#7a5200"))
            svg.append(text(count, x: p.x, y: p.y - r - 3, size: 12, colour: "#7a5200"))
        }
        for m in marks where m.kind == .checkIn {
            let p = screen(m)
            svg.append("<rect x=\"\(f(p.x - 6))\" y=\"\(f(p.y - 6))\" width=\"12\" height=\"12\" fill=\"#6a4c93\" stroke=\"#fff\" stroke-width=\"1.5\" transform=\"rotate(45 \(f(p.x)) \(f(p.y)))\"/>")
            svg.append(text(m.label, x: p.x, y: p.y + 22, size: 12, colour: "#4b2f73"))
        }
        for m in marks where m.kind == .friend {
            let p = screen(m)
            svg.append("<circle cx=\"\(f(p.x))\" cy=\"\(f(p.y))\" r=\"8\" fill=\"#1982c4\" stroke=\"#fff\" stroke-width=\"2\"/>")
            svg.append(text(m.label, x: p.x, y: p.y - 13, size: 13, weight: "bold", colour: "#0d4f7a"))
        }
        for m in marks where m.kind == .you {
            let p = screen(m)
            svg.append("<circle cx=\"\(f(p.x))\" cy=\"\(f(p.y))\" r=\"16\" fill=\"#e63946\" fill-opacity=\"0.18\"/>")
            svg.append("<circle cx=\"\(f(p.x))\" cy=\"\(f(p.y))\" r=\"8\" fill=\"#e63946\" stroke=\"#fff\" stroke-width=\"2.5\"/>")
            svg.append(text(m.label, x: p.x, y: p.y + 30, size: 13, weight: "bold", colour: "#a4161a"))
        }
        // Scale bar (bottom left) and north arrow (top right).
        let barPx = bar * pxPerMetre, by = h - legendHeight - 24
        svg.append("<path d=\"M24 \(f(by))h\(f(barPx))M24 \(f(by - 6))v12M\(f(24 + barPx)) \(f(by - 6))v12\" stroke=\"#333\" stroke-width=\"2\" fill=\"none\"/>")
        svg.append(text(lengthLabel(bar), x: 24 + barPx / 2, y: by - 10, size: 12, colour: "#333"))
        svg.append("<path d=\"M\(f(w - 40)) 22l10 26h-20z\" fill=\"#333\"/>")
        svg.append(text("N", x: w - 40, y: 66, size: 13, weight: "bold", colour: "#333"))
        // Legend.
        let ly = h - legendHeight / 2
        svg.append("<rect y=\"\(f(h - legendHeight))\" width=\"100%\" height=\"\(f(legendHeight))\" fill=\"#fff\" fill-opacity=\"0.85\"/>")
        let legend: [(String, String)] = [("#e63946", "you"), ("#1982c4", "friends"), ("#6a4c93", "check-ins"), ("#f2b134", "venues (people now)")]
        var lx = 24.0
        for (colour, name) in legend {
            svg.append("<circle cx=\"\(f(lx))\" cy=\"\(f(ly))\" r=\"6\" fill=\"\(colour)\"/>")
            svg.append("<text x=\"\(f(lx + 12))\" y=\"\(f(ly + 4))\" font-size=\"12\" fill=\"#333\">\(escape(name))</text>")
            lx += 24 + Double(name.count) * 7.2
        }
        svg.append("<text x=\"\(f(w - 12))\" y=\"\(f(ly + 4))\" font-size=\"11\" fill=\"#666\" text-anchor=\"end\">\(escape(title)) · \(String(format: "%.5f, %.5f", centre.lat, centre.lon))</text>")
        svg.append("</svg>")
        return svg.joined(separator: "\n") + "\n"
    }

    /// 1, 2 or 5 × a power of ten, at most `metres`.
    static func roundLength(_ metres: Double) -> Double {
        let power = pow(10, floor(log10(max(metres, 1))))
        for k in [5.0, 2, 1] where k * power <= metres { return k * power }
        return power
    }

    static func lengthLabel(_ metres: Double) -> String {
        metres >= 1_000 ? "\(f(metres / 1_000)) km" : "\(Int(metres)) m"
    }

    static func text(_ s: String, x: Double, y: Double, size: Int, weight: String = "normal", colour: String) -> String {
        "<text x=\"\(f(x))\" y=\"\(f(y))\" font-size=\"\(size)\" font-weight=\"\(weight)\" fill=\"\(colour)\" text-anchor=\"middle\" "
            + "stroke=\"#f4f1ea\" stroke-width=\"3\" paint-order=\"stroke\">\(escape(s))</text>"
    }

    static func f(_ v: Double) -> String {
        let r = (v * 10).rounded() / 10
        return r == r.rounded() ? String(Int(r)) : String(r)
    }

    static func escape(_ s: String) -> String {
        var out = ""
        for c in s {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            default: out.append(c)
            }
        }
        return out
    }
}
