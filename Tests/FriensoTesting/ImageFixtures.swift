/// Image files built byte by byte for the tests (no binary fixtures in the repository): every
/// header field Frienso reads is real; the pixel data is not decodable.
public enum Fixture {
    /// The GPS latitude as stored: 3 rationals (42/1, 21/1, 3012/100), little-endian.
    public static let gpsLatitude: [UInt8] = [42, 0, 0, 0, 1, 0, 0, 0, 21, 0, 0, 0, 1, 0, 0, 0, 0xC4, 0x0B, 0, 0, 100, 0, 0, 0]
    public static let gpsLongitude: [UInt8] = [71, 0, 0, 0, 1, 0, 0, 0, 5, 0, 0, 0, 1, 0, 0, 0, 0x10, 0x27, 0, 0, 100, 0, 0, 0]

    public static func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF)] }
    public static func le32(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24 & 0xFF)] }
    public static func be16(_ v: Int) -> [UInt8] { [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    public static func be32(_ v: Int) -> [UInt8] { [UInt8(v >> 24 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }

    /// A TIFF (little-endian) with IFD0 = {Orientation 6, GPSInfo → GPS IFD}, and the GPS IFD =
    /// {LatitudeRef N, Latitude, LongitudeRef W, Longitude}.
    public static func exifTIFF() -> [UInt8] {
        var t: [UInt8] = [0x49, 0x49, 0x2A, 0x00] + le32(8)
        // IFD0 at 8: 2 entries (2 + 24 + 4 = 30 bytes) → GPS IFD at 38.
        let gps = 38
        t += le16(2)
        t += le16(0x0112) + le16(3) + le32(1) + le16(6) + [0, 0]       // Orientation = 6
        t += le16(0x8825) + le16(4) + le32(1) + le32(gps)                // GPSInfo
        t += le32(0)
        // GPS IFD at 38: 4 entries (2 + 48 + 4 = 54 bytes) → values at 92.
        let values = gps + 54
        t += le16(4)
        t += le16(1) + le16(2) + le32(2) + [0x4E, 0, 0, 0]               // LatitudeRef "N"
        t += le16(2) + le16(5) + le32(3) + le32(values)                  // Latitude
        t += le16(3) + le16(2) + le32(2) + [0x57, 0, 0, 0]               // LongitudeRef "W"
        t += le16(4) + le16(5) + le32(3) + le32(values + 24)             // Longitude
        t += le32(0)
        t += gpsLatitude + gpsLongitude
        return t
    }

    public static func segment(_ marker: UInt8, _ payload: [UInt8]) -> [UInt8] { [0xFF, marker] + be16(payload.count + 2) + payload }

    /// A baseline JPEG's structure: SOI, [APP1 Exif], SOF0 (width × height, 3 components), SOS,
    /// some entropy-coded bytes, EOI. Not decodable pixels; every header field Frienso reads is real.
    public static func jpeg(width: Int = 640, height: Int = 480, gps: Bool = true, xmpGPS: Bool = false, filler: Int = 2_000, seed: UInt8 = 1) -> [UInt8] {
        var b: [UInt8] = [0xFF, 0xD8]
        b += segment(0xE0, Array("JFIF\0".utf8) + [1, 1, 0, 0, 1, 0, 1, 0, 0])
        if gps { b += segment(0xE1, Array("Exif\0\0".utf8) + exifTIFF()) }
        if xmpGPS {
            b += segment(0xE1, Array("http://ns.adobe.com/xap/1.0/\0".utf8)
                         + Array("<x:xmpmeta><rdf:Description exif:GPSLatitude=\"42,21.5N\" exif:GPSLongitude=\"71,5.1W\"/></x:xmpmeta>".utf8))
        }
        b += segment(0xC0, [8] + be16(height) + be16(width) + [3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1])
        b += segment(0xDA, [3, 1, 0, 2, 0x11, 3, 0x11, 0, 0x3F, 0])
        var x = seed
        for _ in 0..<filler { x = x &* 37 &+ 11; b.append(x == 0xFF ? 0xFE : x) }
        return b + [0xFF, 0xD9]
    }

    public static func pngChunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let body = Array(type.utf8) + data
        return be32(data.count) + body + be32(Int(crc32(body)))
    }

    public static func png(width: Int = 320, height: Int = 200, exif: Bool = false) -> [UInt8] {
        var b: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        b += pngChunk("IHDR", be32(width) + be32(height) + [8, 2, 0, 0, 0])
        if exif { b += pngChunk("eXIf", exifTIFF()) }
        b += pngChunk("IDAT", [0x78, 0x9C, 0x63, 0x60, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01])
        b += pngChunk("IEND", [])
        return b
    }

    public static func webp(width: Int = 100, height: Int = 50) -> [UInt8] {
        let bits = (width - 1) | (height - 1) << 14
        var chunk: [UInt8] = [0x2F] + le32(bits) + [0, 0, 0]
        if chunk.count % 2 == 1 { chunk.append(0) }
        let body: [UInt8] = Array("WEBP".utf8) + Array("VP8L".utf8) + le32(8) + chunk
        return Array("RIFF".utf8) + le32(body.count) + body
    }

    public static func box(_ type: String, _ payload: [UInt8]) -> [UInt8] { be32(payload.count + 8) + Array(type.utf8) + payload }

    public static func heic(width: Int = 4032, height: Int = 3024) -> [UInt8] {
        let ftyp = box("ftyp", Array("heic".utf8) + be32(0) + Array("mif1heic".utf8))
        let ispe = box("ispe", [0, 0, 0, 0] + be32(width) + be32(height))
        let thumb = box("ispe", [0, 0, 0, 0] + be32(320) + be32(240))
        let meta = box("meta", [0, 0, 0, 0] + box("hdlr", [0, 0, 0, 0] + be32(0) + Array("pict".utf8) + [UInt8](repeating: 0, count: 13))
                       + box("iprp", box("ipco", thumb + ispe)))
        let mdat = box("mdat", Array("Exif\0\0".utf8) + exifTIFF() + [UInt8](repeating: 7, count: 500))
        return ftyp + meta + mdat
    }

    public static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard haystack.count >= needle.count else { return false }
        return (0...(haystack.count - needle.count)).contains { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
    }
}

/// PNG's chunk checksum, bit by bit (test fixtures only).
func crc32(_ bytes: [UInt8]) -> UInt32 {
    var c: UInt32 = 0xFFFF_FFFF
    for byte in bytes {
        c ^= UInt32(byte)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
    }
    return c ^ 0xFFFF_FFFF
}
