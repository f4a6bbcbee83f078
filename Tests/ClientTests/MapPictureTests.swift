import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import FriensoClient
import Testing

@Suite("map picture")
struct MapPictureTests {
    let marks = [
        MapMark(.you, latitude: 33.7838, longitude: -118.1141, label: "you"),
        MapMark(.friend, latitude: 33.7848, longitude: -118.1121, label: "Tom & Jerry <3"),     // north-east
        MapMark(.checkIn, latitude: 33.7828, longitude: -118.1161, label: "cyd at Library"),   // south-west
        MapMark(.venue(people: 12, friends: 2, radiusMetres: 60), latitude: 33.7873, longitude: -118.1143, label: "The Pyramid"),
    ]

    /// (cx, cy) of the first circle whose line holds all of `attributes` (legend dots have none of the strokes).
    func centre(_ svg: String, _ attributes: String...) throws -> (Double, Double) {
        let line = try #require(svg.split(separator: "\n").first { l in l.hasPrefix("<circle") && attributes.allSatisfy { l.contains($0) } })
        func attribute(_ name: String) throws -> Double {
            let value = try #require(line.components(separatedBy: "\(name)=\"").dropFirst().first?.prefix { $0 != "\"" })
            return try #require(Double(value))
        }
        return (try attribute("cx"), try attribute("cy"))
    }

    @Test func wellFormed_labelsEscaped_countsShown() throws {
        let svg = MapPicture.svg(marks, width: 900, height: 640)
        let parser = XMLParser(data: Data(svg.utf8))
        #expect(parser.parse(), "not well-formed XML: \(parser.parserError.map { "\($0)" } ?? "")")
        #expect(svg.contains("Tom &amp; Jerry &lt;3") && !svg.contains("Tom & Jerry"))
        #expect(svg.contains(">The Pyramid<") && svg.contains(">12 here, 2 friends<"))
        #expect(svg.contains(">cyd at Library<") && svg.contains(">you<"))
    }

    @Test func youAreInTheMiddle_northIsUp_eastIsRight() throws {
        let svg = MapPicture.svg(marks, width: 900, height: 640)
        let you = try centre(svg, "fill=\"#e63946\"", "stroke=\"#fff\"")
        let friend = try centre(svg, "fill=\"#1982c4\"", "stroke=\"#fff\"")
        #expect(you.0 == 450)
        #expect(friend.0 > you.0 && friend.1 < you.1, "the friend is north-east: right and up")
        let venue = try centre(svg, "stroke=\"#c98a0b\"")
        #expect(venue.1 < friend.1, "the venue is further north")
    }

    @Test func scaleBar_hasARoundLength() {
        // The map reaches ~490 m from you (the venue and its 60 m): a bar of a fifth of the width
        // rounds down to 100 m (1, 2 or 5 × a power of ten).
        #expect(MapPicture.svg(marks).contains(">100 m<"))
        let far = marks + [MapMark(.friend, latitude: 33.90, longitude: -118.1141, label: "far")]
        #expect(MapPicture.svg(far).contains(" km<"), "kilometres when the map spans kilometres")
        #expect(MapPicture.svg([]).contains("</svg>"), "an empty map is still a picture")
    }
}
