import Foundation
import SocialReplica

/// The in-memory index of every user's latest position: a grid of cells of `cellDegrees` ×
/// `cellDegrees` (lat × lon), each holding a compact array of the users inside.
///
/// - Memory: per user, 12 bytes in its cell (slot, lat, lon as `Float`: ~1 m resolution), 20 in
///   the slot tables (user id, cell, position in the cell) and one id → slot dictionary entry.
/// - k-nearest: rings of cells around the query's cell, nearest ring first, keeping the best k
///   and stopping at the first ring whose lower bound is beyond the k-th distance: a dense area
///   answers from a few cells, never scanning every point within the radius when only k are
///   wanted. A ring's cells come from each row's list of occupied columns, walked outward from
///   the query's column, so empty cells cost nothing. Near a pole, the candidate cells are listed
///   with a bound each and scanned in order.
/// - Antimeridian: column indices wrap.
public struct SpatialIndex: Sendable {
    struct Entry: Sendable {
        var slot: UInt32
        var lat: Float
        var lon: Float
    }

    public let cellDegrees: Double
    private let columns: Int
    private let rows: Int
    private var cells: [Int: [Entry]] = [:]
    /// Each row's occupied columns, ascending. A search reads a row's list once and walks it
    /// outward from its own column; asking `cells` about every cell of every ring instead (most
    /// of them empty) cost a hash per cell, more than half of a nearby search (item 85).
    private var occupied: [Int: [Int32]] = [:]
    private var slotOf: [UInt64: UInt32] = [:]
    private var userOf: [UInt64] = []        // slot → user id
    private var cellOf: [Int] = []           // slot → cell key
    private var positionOf: [UInt32] = []    // slot → index in its cell
    private var freeSlots: [UInt32] = []

    /// - Parameter cellDegrees: cell size (default 0.0025°: ~278 m north-south; at least 0.001°).
    public init(cellDegrees: Double = 0.0025) {
        let step = max(0.001, min(cellDegrees, 10))
        self.cellDegrees = step
        columns = Int((360 / step).rounded(.up))
        rows = Int((180 / step).rounded(.up)) + 1
    }

    public var count: Int { slotOf.count }

    private func row(_ lat: Double) -> Int { min(rows - 1, max(0, Int(((lat + 90) / cellDegrees).rounded(.down)))) }
    private func column(_ lon: Double) -> Int {
        let c = Int(((lon + 180) / cellDegrees).rounded(.down)) % columns
        return c < 0 ? c + columns : c
    }
    private func key(_ row: Int, _ column: Int) -> Int { row * columns + column }
    /// cos of the latitude of row `r` farthest from the equator: the smallest cos in the row.
    private func cosMin(row r: Int) -> Double {
        let low = Double(r) * cellDegrees - 90
        return cos(GeoMath.radians(min(90, max(abs(low), abs(low + cellDegrees)))))
    }

    // MARK: Changing

    /// Puts `user` at (lat, lon), moving them if they were elsewhere.
    public mutating func upsert(_ user: UInt64, lat: Double, lon: Double) {
        let entryLat = Float(lat), entryLon = Float(lon)
        let cell = key(row(lat), column(lon))
        if let slot = slotOf[user] {
            let s = Int(slot)
            if Int(cellOf[s]) == cell {
                cells[cell]![Int(positionOf[s])] = Entry(slot: slot, lat: entryLat, lon: entryLon)
                return
            }
            detach(slot)
            attach(slot, cell: cell, lat: entryLat, lon: entryLon)
            return
        }
        let slot: UInt32
        if let free = freeSlots.popLast() {
            slot = free
            userOf[Int(slot)] = user
        } else {
            slot = UInt32(userOf.count)
            userOf.append(user)
            cellOf.append(0)
            positionOf.append(0)
        }
        slotOf[user] = slot
        attach(slot, cell: cell, lat: entryLat, lon: entryLon)
    }

    public mutating func remove(_ user: UInt64) {
        guard let slot = slotOf.removeValue(forKey: user) else { return }
        detach(slot)
        userOf[Int(slot)] = 0
        freeSlots.append(slot)
    }

    private mutating func attach(_ slot: UInt32, cell: Int, lat: Float, lon: Float) {
        cellOf[Int(slot)] = cell
        let count = cells[cell]?.count ?? 0
        if count == 0 { markOccupied(cell, true) }
        positionOf[Int(slot)] = UInt32(count)
        cells[cell, default: []].append(Entry(slot: slot, lat: lat, lon: lon))
    }

    /// Adds `cell`'s column to its row's list, or removes it (the cell's first entry came, or
    /// its last left).
    private mutating func markOccupied(_ cell: Int, _ isOccupied: Bool) {
        let r = cell / columns, c = Int32(cell % columns)
        let (found, index) = (occupied[r] ?? []).sortedPosition(of: c)
        if isOccupied {
            if !found { occupied[r, default: []].insert(c, at: index) }
        } else if found {
            if occupied[r]!.count == 1 { occupied[r] = nil } else { occupied[r]!.remove(at: index) }
        }
    }

    /// Removes the slot from its cell by moving the cell's last entry into its place.
    private mutating func detach(_ slot: UInt32) {
        let cell = Int(cellOf[Int(slot)]), position = Int(positionOf[Int(slot)])
        var entries = cells.removeValue(forKey: cell)!
        let last = entries.removeLast()
        if position < entries.count {
            entries[position] = last
            positionOf[Int(last.slot)] = UInt32(position)
        }
        if entries.isEmpty { markOccupied(cell, false) } else { cells[cell] = entries }
    }

    /// Where the index has `user` (as stored: `Float` precision).
    public func position(of user: UInt64) -> (lat: Double, lon: Double)? {
        guard let slot = slotOf[user] else { return nil }
        let e = cells[Int(cellOf[Int(slot)])]![Int(positionOf[Int(slot)])]
        return (Double(e.lat), Double(e.lon))
    }

    // MARK: Queries

    /// Cells that may hold points within `radius` of (lat, lon), with the haversine term of a lower
    /// bound on their distance, nearest bound first.
    private func candidateCells(lat: Double, lon: Double, radius: Double) -> [(bound: Double, key: Int, cosMin: Double)] {
        let dLat = radius / GeoMath.metresPerDegree
        let latMin = max(-90, lat - dLat), latMax = min(90, lat + dLat)
        var allColumns = latMin <= -90 || latMax >= 90
        var dLon = 180.0
        if !allColumns {
            let widest = cos(GeoMath.radians(max(abs(latMin), abs(latMax))))
            dLon = radius / (GeoMath.metresPerDegree * widest)
            allColumns = dLon >= 180
        }
        let firstColumn = allColumns ? 0 : Int(((lon - dLon + 180) / cellDegrees).rounded(.down))
        let lastColumn = allColumns ? columns - 1 : Int(((lon + dLon + 180) / cellDegrees).rounded(.down))
        let span = min(columns, lastColumn - firstColumn + 1)
        let cosLat = cos(GeoMath.radians(lat))
        let limit = GeoMath.term(forDistance: radius)
        var result: [(bound: Double, key: Int, cosMin: Double)] = []
        let firstRow = row(latMin), lastRow = row(latMax)
        func consider(_ r: Int, _ c: Int) {
            let cellLatMin = Double(r) * cellDegrees - 90, cellLatMax = cellLatMin + cellDegrees
            // Latitude part of the bound: the nearest latitude of the cell.
            let nearestLat = min(max(lat, cellLatMin), cellLatMax)
            let a = sin(GeoMath.radians(nearestLat - lat) / 2)
            let cosMin = cosMin(row: r)
            let cellLonMin = Double(c) * cellDegrees - 180
            // Smallest longitude difference from the query to the cell's interval, across the antimeridian.
            var dl = 0.0
            let rel = (lon - cellLonMin).truncatingRemainder(dividingBy: 360)
            let inside = rel < 0 ? rel + 360 : rel
            if inside > cellDegrees { dl = min(inside - cellDegrees, 360 - inside) }
            let b = sin(GeoMath.radians(min(dl, 180)) / 2)
            let bound = a * a + cosLat * cosMin * b * b
            if bound <= limit { result.append((bound, key(r, c), cosMin)) }
        }
        if (lastRow - firstRow + 1) * span > cells.count {
            // Near a pole a box spans every column (144,000 at 0.0025°): walking the occupied
            // cells is cheaper than walking the box, and costs the same whatever the query.
            for cellKey in cells.keys {
                let r = cellKey / columns
                if r >= firstRow, r <= lastRow { consider(r, cellKey % columns) }
            }
        } else {
            for r in firstRow...lastRow {
                for offset in 0..<span {
                    var c = (firstColumn + offset) % columns
                    if c < 0 { c += columns }
                    if cells[key(r, c)] != nil { consider(r, c) }
                }
            }
        }
        result.sort { $0.bound < $1.bound }
        return result
    }

    /// The `limit` nearest users within `radius` metres that pass `include`, nearest first (ties by
    /// id), with their distances.
    ///
    /// Most points are rejected without trigonometry: the haversine term is at least
    /// sin²(Δlat/2), and at least cos(lat)·cos(lat_min of the cell)·sin²(Δlon/2), so a point whose
    /// latitude or longitude difference alone exceeds what the current k-th term allows is skipped
    /// with two subtractions and two comparisons.
    public func nearest(lat: Double, lon: Double, radius: Double, limit: Int,
                        include: (UInt64) -> Bool) -> [(user: UInt64, distance: Double)] {
        nearest(lat: lat, lon: lon, radius: radius, limit: limit, reading: ()) { _, user in include(user) }
    }

    /// `nearest`, with `include` handed what it reads (`context`) as an argument rather than
    /// capturing it: a closure that captures a struct (geo's state, the social graph) and calls
    /// a method on it copies the whole struct on every call, a retain and a release per field;
    /// an argument is borrowed (`docs/benchmarks.md`, item 81).
    public func nearest<Context>(lat: Double, lon: Double, radius: Double, limit: Int, reading context: Context,
                                 include: (Context, UInt64) -> Bool) -> [(user: UInt64, distance: Double)] {
        guard limit > 0 else { return [] }
        var search = Search(lat: lat, lon: lon, radius: radius, limit: limit)
        // Rings of cells around the query's cell, nearest ring first, stopping once a whole ring
        // is beyond the k-th distance. Near a pole (or for a huge radius) a ring would wrap
        // around every column: there, the bounding-box list of cells, sorted by bound.
        let dLat = radius / GeoMath.metresPerDegree
        let latMin = max(-90, lat - dLat), latMax = min(90, lat + dLat)
        let cosMinRange = cos(GeoMath.radians(min(90, max(abs(latMin), abs(latMax)))))
        let dLon = cosMinRange > 1e-9 ? radius / (GeoMath.metresPerDegree * cosMinRange) : 360
        let columnSpan = Int((dLon / cellDegrees).rounded(.up)) + 1
        let lastRing = max(Int((dLat / cellDegrees).rounded(.up)) + 1, columnSpan)
        if latMin <= -90 || latMax >= 90 || columnSpan > 256 || 2 * lastRing + 1 > columns {
            for cell in candidateCells(lat: lat, lon: lon, radius: radius) {
                if search.full, cell.bound > search.worst { break }
                search.scan(cells[cell.key]!, cosMin: cell.cosMin, userOf: userOf, context: context, include: include)
            }
            return search.result()
        }
        let r0 = row(lat), c0 = column(lon)
        let stepRadians = GeoMath.radians(cellDegrees)
        // The rows the rings have reached, each walking its occupied columns outward.
        var walks: [RowWalk] = []
        walks.reserveCapacity(2 * min(lastRing, 64) + 1)
        for k in 0...lastRing {
            if k >= 2 {
                // Everything on ring k is at least k-1 whole cells away in latitude or longitude.
                let s = sin(Double(k - 1) * stepRadians / 2)
                let ringBound = min(s * s, search.cosLat * cosMinRange * s * s)
                if ringBound > search.radiusTerm || (search.full && ringBound > search.worst) { break }
            }
            // Ring k's two new rows (one at k = 0) join with their occupied columns.
            var r = r0 - k
            while r <= r0 + k {
                if r >= 0, r < rows, let list = occupied[r] {
                    walks.append(RowWalk(row: r, cosMin: cosMin(row: r), columns: list, center: c0, width: columns))
                }
                r += max(1, 2 * k)
            }
            // Ring k is every cell at most k columns from the query's in the new rows, and the
            // cells exactly k columns away in the rows that joined before (the nearer ones were
            // taken by earlier rings): in both, the columns not taken yet that are at most k away.
            for w in walks.indices {
                while let c = walks[w].next(within: k) {
                    search.scan(cells[key(walks[w].row, c)]!, cosMin: walks[w].cosMin, userOf: userOf, context: context, include: include)
                }
            }
        }
        return search.result()
    }

    /// One row's occupied columns, taken in order of their distance from the query's column
    /// (`center`): a cursor to each side, wrapping around the antimeridian. Only called with
    /// rings narrower than the world (`2 * lastRing + 1 <= columns`), so no column is within
    /// reach from both sides.
    private struct RowWalk {
        let row: Int
        let cosMin: Double
        let columns: [Int32]
        let center: Int
        let width: Int
        /// The next index to the right (the center's column included) and to the left.
        var right: Int
        var left: Int
        /// Columns taken so far: never more than the row has.
        var taken = 0

        init(row: Int, cosMin: Double, columns: [Int32], center: Int, width: Int) {
            self.row = row
            self.cosMin = cosMin
            self.columns = columns
            self.center = center
            self.width = width
            right = columns.sortedPosition(of: Int32(center)).index % columns.count
            left = (right + columns.count - 1) % columns.count
        }

        /// The next column not taken yet that is at most `reach` columns from the center.
        mutating func next(within reach: Int) -> Int? {
            guard taken < columns.count else { return nil }
            let r = Int(columns[right])
            if (r - center + width) % width <= reach {
                taken += 1
                right = (right + 1) % columns.count
                return r
            }
            let l = Int(columns[left])
            if (center - l + width) % width <= reach {
                taken += 1
                left = (left + columns.count - 1) % columns.count
                return l
            }
            return nil
        }
    }

    /// The running state of one k-nearest search.
    private struct Search {
        let lat: Double, lon: Double, cosLat: Double, radiusTerm: Double, limit: Int
        /// The best so far as (term, user), sorted; once full, the k-th term bounds the search.
        var best: [(term: Double, user: UInt64)] = []
        var worst: Double
        var maxDLat: Double

        init(lat: Double, lon: Double, radius: Double, limit: Int) {
            self.lat = lat
            self.lon = lon
            self.limit = limit
            cosLat = cos(GeoMath.radians(lat))
            radiusTerm = GeoMath.term(forDistance: radius)
            worst = radiusTerm
            maxDLat = Self.angle(radiusTerm)
            best.reserveCapacity(limit + 1)
        }

        var full: Bool { best.count == limit }

        /// The largest angle (degrees) whose half-angle sine squared stays within `term`, widened a
        /// little so rounding (and `Float` storage) can never skip a point the exact test accepts.
        static func angle(_ term: Double) -> Double { 2 * asin(min(1, max(0, term).squareRoot())) * 180 / .pi * (1 + 1e-6) + 1e-9 }

        /// Most points are rejected without trigonometry: the haversine term is at least
        /// sin²(Δlat/2), and at least cos(lat)·cos(lat_min of the cell)·sin²(Δlon/2).
        mutating func scan<Context>(_ entries: [Entry], cosMin: Double, userOf: [UInt64], context: Context, include: (Context, UInt64) -> Bool) {
            let lonFactor = cosLat * cosMin
            var cellWorst = worst
            var maxDLon = lonFactor > 1e-12 ? Self.angle(worst / lonFactor) : 360
            for entry in entries {
                if cellWorst != worst {
                    cellWorst = worst
                    maxDLon = lonFactor > 1e-12 ? Self.angle(worst / lonFactor) : 360
                }
                let entryLat = Double(entry.lat), entryLon = Double(entry.lon)
                if abs(entryLat - lat) > maxDLat { continue }
                var dLon = abs(entryLon - lon)
                if dLon > 180 { dLon = 360 - dLon }
                if dLon > maxDLon { continue }
                let h = GeoMath.haversineTerm(lat1: lat, lon1: lon, cosLat1: cosLat, lat2: entryLat, lon2: entryLon)
                guard h <= radiusTerm else { continue }
                if full, h > best[limit - 1].term { continue }
                let user = userOf[Int(entry.slot)]
                if full, h == best[limit - 1].term, user > best[limit - 1].user { continue }
                guard include(context, user) else { continue }
                var i = best.count
                while i > 0, best[i - 1].term > h || (best[i - 1].term == h && best[i - 1].user > user) { i -= 1 }
                best.insert((h, user), at: i)
                if best.count > limit { best.removeLast() }
                if full, best[limit - 1].term != worst {
                    worst = best[limit - 1].term
                    maxDLat = Self.angle(worst)
                }
            }
        }

        func result() -> [(user: UInt64, distance: Double)] { best.map { ($0.user, GeoMath.distance(fromTerm: $0.term)) } }
    }

    /// Calls `visit` for every user within `radius` metres, with the distance (any order).
    public func forEach(within radius: Double, ofLat lat: Double, lon: Double, _ visit: (UInt64, Double) -> Void) {
        let cosLat = cos(GeoMath.radians(lat))
        let radiusTerm = GeoMath.term(forDistance: radius)
        for cell in candidateCells(lat: lat, lon: lon, radius: radius) {
            for entry in cells[cell.key]! {
                let h = GeoMath.haversineTerm(lat1: lat, lon1: lon, cosLat1: cosLat, lat2: Double(entry.lat), lon2: Double(entry.lon))
                if h <= radiusTerm { visit(userOf[Int(entry.slot)], GeoMath.distance(fromTerm: h)) }
            }
        }
    }

    /// Every user and stored position (tests and the brute-force reference).
    public func allPositions() -> [(user: UInt64, lat: Double, lon: Double)] {
        cells.values.flatMap { $0.map { (userOf[Int($0.slot)], Double($0.lat), Double($0.lon)) } }
    }
}
