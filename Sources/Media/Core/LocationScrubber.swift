public import FriensoProto

/// Removes where a photo was taken before it is stored. The EXIF GPS directory is emptied in place
/// (its entries and every value they point to are zeroed, its count set to 0) and IFD0's pointer to
/// it is removed, so no offset in the file moves and the rest of the metadata (orientation,
/// camera) stays valid; in JPEGs an XMP
/// packet naming GPS coordinates is dropped whole. EXIF is found where each format keeps it: JPEG
/// APP1, PNG `eXIf` (its CRC rewritten), WebP `EXIF`, and the HEIF Exif item (`Exif\0\0` + TIFF
/// header, wherever the item's bytes lie).
public enum LocationScrubber {
    /// - Returns: whether any location metadata was found and removed.
    public static func scrub(_ bytes: inout [UInt8], type: MediaV1.ImageType) -> Bool {
        switch type {
        case .jpeg: return scrubJPEG(&bytes)
        case .png: return scrubPNG(&bytes)
        case .webp: return scrubWebP(&bytes)
        case .heic: return scrubAnyExif(&bytes)
        default: return false
        }
    }

    static let exifHeader = Array("Exif\0\0".utf8)
    static let xmpHeader = Array("http://ns.adobe.com/xap/1.0/\0".utf8)

    static func scrubJPEG(_ b: inout [UInt8]) -> Bool {
        guard let (segments, _) = try? ImageInspector.jpegSegments(b) else { return false }
        var removed = false
        var drop: [Range<Int>] = []
        for s in segments where s.marker == 0xE1 {
            let data = s.at + 4, end = s.at + s.length
            if b[data..<end].starts(with: exifHeader) {
                removed = scrubTIFF(&b, base: data + exifHeader.count, end: end) || removed
            } else if b[data..<end].starts(with: xmpHeader), contains(b[data..<end], "GPSLatitude") || contains(b[data..<end], "GPSLongitude") {
                drop.append(s.at..<end)
            }
        }
        for range in drop.reversed() { b.removeSubrange(range) }
        return removed || !drop.isEmpty
    }

    static func scrubPNG(_ b: inout [UInt8]) -> Bool {
        guard let chunks = try? ImageInspector.pngChunks(b) else { return false }
        var removed = false
        for c in chunks where c.type == "eXIf" {
            let data = c.at + 8, end = data + c.dataLength
            if scrubTIFF(&b, base: data, end: end) {
                removed = true
                let crc = CRC32.checksum(b[(c.at + 4)..<end])
                for k in 0..<4 { b[end + k] = UInt8(truncatingIfNeeded: crc >> (24 - 8 * UInt32(k))) }
            }
        }
        return removed
    }

    static func scrubWebP(_ b: inout [UInt8]) -> Bool {
        guard let chunks = try? ImageInspector.webpChunks(b) else { return false }
        var removed = false
        for c in chunks where c.fourCC == "EXIF" {
            var data = c.at + 8
            let end = data + c.dataLength
            if b[data..<end].starts(with: exifHeader) { data += exifHeader.count }
            removed = scrubTIFF(&b, base: data, end: end) || removed
        }
        return removed
    }

    /// Every `Exif\0\0` followed by a TIFF header: eight fixed bytes, not found by chance in
    /// compressed image data often enough to matter, and checked further by `scrubTIFF`.
    static func scrubAnyExif(_ b: inout [UInt8]) -> Bool {
        var removed = false
        var i = 0
        while i + 10 <= b.count {
            if b[i] == 0x45, b[i..<(i + 6)].elementsEqual(exifHeader) {
                let t = i + 6
                let little = b[t] == 0x49 && b[t + 1] == 0x49 && b[t + 2] == 0x2A && b[t + 3] == 0
                let big = b[t] == 0x4D && b[t + 1] == 0x4D && b[t + 2] == 0 && b[t + 3] == 0x2A
                if little || big { removed = scrubTIFF(&b, base: t, end: b.count) || removed }
            }
            i += 1
        }
        return removed
    }

    /// Empties the GPS IFD of the TIFF structure at `base` (bounded by `end`), in place.
    /// - Returns: whether it held any entry.
    static func scrubTIFF(_ b: inout [UInt8], base: Int, end: Int) -> Bool {
        guard end - base >= 8 else { return false }
        let little: Bool
        switch (b[base], b[base + 1]) {
        case (0x49, 0x49): little = true
        case (0x4D, 0x4D): little = false
        default: return false
        }
        func u16(_ i: Int) -> Int { little ? Int(b[i]) | Int(b[i + 1]) << 8 : Int(b[i]) << 8 | Int(b[i + 1]) }
        func u32(_ i: Int) -> Int {
            little ? Int(b[i]) | Int(b[i + 1]) << 8 | Int(b[i + 2]) << 16 | Int(b[i + 3]) << 24
                : Int(b[i]) << 24 | Int(b[i + 1]) << 16 | Int(b[i + 2]) << 8 | Int(b[i + 3])
        }
        let ifd0 = base + u32(base + 4)
        guard ifd0 >= base + 8, ifd0 + 2 <= end else { return false }
        let n = u16(ifd0)
        var gps: Int?
        var gpsEntry = 0
        for k in 0..<n {
            let e = ifd0 + 2 + 12 * k
            guard e + 12 <= end else { return false }
            if u16(e) == 0x8825 { gps = base + u32(e + 8); gpsEntry = k }
        }
        guard ifd0 + 2 + 12 * n + 4 <= end else { return false }
        guard let g = gps, g >= base + 8, g + 2 <= end else { return false }
        let m = u16(g)
        guard m > 0 else { return false }
        let sizes = [0, 1, 1, 2, 4, 8, 1, 1, 2, 4, 8, 4, 8] // by TIFF field type 1...12
        for j in 0..<m {
            let e = g + 2 + 12 * j
            guard e + 12 <= end else { break }
            let type = u16(e + 2), count = u32(e + 4)
            let size = (1...12).contains(type) ? sizes[type] * count : 0
            if size > 4 {
                let at = base + u32(e + 8)
                if at >= base, size <= end - at { b.replaceSubrange(at..<(at + size), with: repeatElement(0, count: size)) }
            }
            b.replaceSubrange(e..<(e + 12), with: repeatElement(0, count: 12))
        }
        b[g] = 0
        b[g + 1] = 0
        if g + 6 <= end { b.replaceSubrange((g + 2)..<(g + 6), with: repeatElement(0, count: 4)) } // no next IFD
        // Then IFD0's pointer to it goes: the later entries and the next-IFD offset move up 12
        // bytes inside IFD0's own block (nothing points into it), and the count drops by one.
        let from = ifd0 + 2 + 12 * (gpsEntry + 1), to = ifd0 + 2 + 12 * n + 4
        b.replaceSubrange((from - 12)..<(to - 12), with: Array(b[from..<to]))
        b.replaceSubrange((to - 12)..<to, with: repeatElement(0, count: 12))
        let count = n - 1
        if little { b[ifd0] = UInt8(count & 0xFF); b[ifd0 + 1] = UInt8(count >> 8) } else { b[ifd0] = UInt8(count >> 8); b[ifd0 + 1] = UInt8(count & 0xFF) }
        return true
    }

    static func contains(_ haystack: ArraySlice<UInt8>, _ needle: String) -> Bool {
        let n = Array(needle.utf8)
        guard haystack.count >= n.count else { return false }
        var i = haystack.startIndex
        while i + n.count <= haystack.endIndex {
            if haystack[i] == n[0], haystack[i..<(i + n.count)].elementsEqual(n) { return true }
            i += 1
        }
        return false
    }
}

/// PNG's chunk checksum (ISO 3309 CRC-32), table-driven.
enum CRC32 {
    static let table: [UInt32] = (0..<256).map { n -> UInt32 in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static func checksum(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for byte in bytes { c = table[Int((c ^ UInt32(byte)) & 0xFF)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }
}
