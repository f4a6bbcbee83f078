public import FriensoProto

/// Why an upload is not an image Frienso stores. The message is shown to the uploader.
public struct ImageError: Error, Equatable, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// What the bytes say an image is: type from the magic numbers, dimensions from the header, and
/// whether the file is whole. Written by hand: no listed Swift package reads image headers, and a
/// full decoder (libjpeg, libpng, libheif) would be far more code and attack surface than the
/// few header fields needed here.
public enum ImageInspector {
    /// Bytes needed to decide the type.
    public static let sniffLength = 12

    /// The type from the first bytes, or nil when they are not a JPEG, PNG, HEIC or WebP.
    public static func sniff<C: RandomAccessCollection<UInt8>>(_ prefix: C) -> MediaV1.ImageType? where C.Index == Int {
        let b = Array(prefix.prefix(sniffLength))
        if b.count >= 3, b[0] == 0xFF, b[1] == 0xD8, b[2] == 0xFF { return .jpeg }
        if b.count >= 8, b[0..<8].elementsEqual([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
        if b.count >= 12, b[0..<4].elementsEqual(Array("RIFF".utf8)), b[8..<12].elementsEqual(Array("WEBP".utf8)) { return .webp }
        if b.count >= 12, b[4..<8].elementsEqual(Array("ftyp".utf8)),
           let brand = String(bytes: b[8..<12], encoding: .ascii), heifBrands.contains(brand) { return .heic }
        return nil
    }

    static let heifBrands: Set<String> = ["heic", "heix", "hevc", "hevx", "heim", "heis", "mif1", "msf1", "avif"]

    public struct Dimensions: Equatable, Sendable {
        public var width: UInt32
        public var height: UInt32
    }

    /// Checks that the whole file is there and well formed as far as its structure goes, and reads
    /// the dimensions. - Throws: `ImageError` naming what is wrong (truncated, no size, ...).
    public static func inspect(_ bytes: [UInt8], as type: MediaV1.ImageType) throws(ImageError) -> Dimensions {
        let d: Dimensions
        switch type {
        case .jpeg: d = try jpeg(bytes)
        case .png: d = try png(bytes)
        case .webp: d = try webp(bytes)
        case .heic: d = try heic(bytes)
        default: throw ImageError("not an image")
        }
        guard d.width > 0, d.height > 0 else { throw ImageError("the image says it has no pixels") }
        return d
    }

    public static func mimeType(_ type: MediaV1.ImageType) -> String {
        switch type {
        case .jpeg: "image/jpeg"
        case .png: "image/png"
        case .webp: "image/webp"
        case .heic: "image/heic"
        default: "application/octet-stream"
        }
    }

    // MARK: JPEG

    /// Segments of a JPEG up to the start of scan, as (marker, offset of the marker, total length).
    static func jpegSegments(_ b: [UInt8]) throws(ImageError) -> (segments: [(marker: UInt8, at: Int, length: Int)], scanAt: Int) {
        var segments: [(UInt8, Int, Int)] = []
        var i = 2
        while true {
            guard i + 4 <= b.count else { throw ImageError("truncated JPEG (ends inside its headers)") }
            guard b[i] == 0xFF else { throw ImageError("malformed JPEG (no marker at byte \(i))") }
            var m = i + 1
            while m < b.count && b[m] == 0xFF { m += 1 } // fill bytes
            guard m + 2 < b.count else { throw ImageError("truncated JPEG (ends inside its headers)") }
            let marker = b[m]
            if marker == 0xD8 || marker == 0x01 || (0xD0...0xD7).contains(marker) { i = m + 1; continue }
            if marker == 0xD9 { throw ImageError("malformed JPEG (ends before any image data)") }
            let length = Int(b[m + 1]) << 8 | Int(b[m + 2])
            guard length >= 2 else { throw ImageError("malformed JPEG (segment length \(length))") }
            let end = m + 1 + length
            guard end <= b.count else { throw ImageError("truncated JPEG (a header segment runs past the end)") }
            segments.append((marker, i, end - i))
            if marker == 0xDA { return (segments, end) }
            i = end
        }
    }

    static func jpeg(_ b: [UInt8]) throws(ImageError) -> Dimensions {
        let (segments, scanAt) = try jpegSegments(b)
        // A whole JPEG ends with EOI after its entropy-coded data; a cut-off one does not.
        var end = b.count
        while end > scanAt && b[end - 1] == 0x00 { end -= 1 } // padding some writers add
        guard end - scanAt >= 2, b[end - 2] == 0xFF, b[end - 1] == 0xD9 else { throw ImageError("truncated JPEG (no end-of-image marker)") }
        let frames: Set<UInt8> = [0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF]
        guard let sof = segments.first(where: { frames.contains($0.marker) }) else { throw ImageError("malformed JPEG (no frame header)") }
        let p = sof.at + 2 // after FF Cx: length(2) precision(1) height(2) width(2)
        guard sof.length >= 9 else { throw ImageError("malformed JPEG (short frame header)") }
        let height = UInt32(b[p + 3]) << 8 | UInt32(b[p + 4])
        let width = UInt32(b[p + 5]) << 8 | UInt32(b[p + 6])
        return Dimensions(width: width, height: height)
    }

    // MARK: PNG

    static func pngChunks(_ b: [UInt8]) throws(ImageError) -> [(type: String, at: Int, dataLength: Int)] {
        var chunks: [(String, Int, Int)] = []
        var i = 8
        while true {
            guard i + 12 <= b.count else { throw ImageError("truncated PNG (no end chunk)") }
            let length = Int(readBE32(b, i))
            guard length <= b.count - i - 12 else { throw ImageError("truncated PNG (a chunk runs past the end)") }
            let type = String(decoding: b[(i + 4)..<(i + 8)], as: UTF8.self)
            chunks.append((type, i, length))
            if type == "IEND" { return chunks }
            i += 12 + length
        }
    }

    static func png(_ b: [UInt8]) throws(ImageError) -> Dimensions {
        let chunks = try pngChunks(b)
        guard let ihdr = chunks.first, ihdr.type == "IHDR", ihdr.dataLength >= 8 else { throw ImageError("malformed PNG (no header chunk)") }
        return Dimensions(width: readBE32(b, ihdr.at + 8), height: readBE32(b, ihdr.at + 12))
    }

    // MARK: WebP

    static func webpChunks(_ b: [UInt8]) throws(ImageError) -> [(fourCC: String, at: Int, dataLength: Int)] {
        guard b.count >= 12 else { throw ImageError("truncated WebP") }
        let riffSize = Int(readLE32(b, 4))
        guard riffSize + 8 <= b.count else { throw ImageError("truncated WebP (\(b.count) of \(riffSize + 8) bytes)") }
        var chunks: [(String, Int, Int)] = []
        var i = 12
        let end = riffSize + 8
        while i + 8 <= end {
            let length = Int(readLE32(b, i + 4))
            guard length <= end - i - 8 else { throw ImageError("truncated WebP (a chunk runs past the end)") }
            chunks.append((String(decoding: b[i..<(i + 4)], as: UTF8.self), i, length))
            i += 8 + length + (length & 1)
        }
        return chunks
    }

    static func webp(_ b: [UInt8]) throws(ImageError) -> Dimensions {
        let chunks = try webpChunks(b)
        guard let first = chunks.first else { throw ImageError("malformed WebP (no chunks)") }
        let p = first.at + 8
        switch first.fourCC {
        case "VP8X" where first.dataLength >= 10:
            let w = UInt32(b[p + 4]) | UInt32(b[p + 5]) << 8 | UInt32(b[p + 6]) << 16
            let h = UInt32(b[p + 7]) | UInt32(b[p + 8]) << 8 | UInt32(b[p + 9]) << 16
            return Dimensions(width: w + 1, height: h + 1)
        case "VP8 " where first.dataLength >= 10:
            guard b[p + 3] == 0x9D, b[p + 4] == 0x01, b[p + 5] == 0x2A else { throw ImageError("malformed WebP (bad VP8 start code)") }
            let w = (UInt32(b[p + 6]) | UInt32(b[p + 7]) << 8) & 0x3FFF
            let h = (UInt32(b[p + 8]) | UInt32(b[p + 9]) << 8) & 0x3FFF
            return Dimensions(width: w, height: h)
        case "VP8L" where first.dataLength >= 5:
            guard b[p] == 0x2F else { throw ImageError("malformed WebP (bad VP8L signature)") }
            let bits = readLE32(b, p + 1)
            return Dimensions(width: (bits & 0x3FFF) + 1, height: ((bits >> 14) & 0x3FFF) + 1)
        default:
            throw ImageError("malformed WebP (unknown first chunk \(first.fourCC))")
        }
    }

    // MARK: HEIC (ISO base media file format)

    /// Top-level boxes must tile the file exactly: a cut-off file has a box running past its end.
    static func heic(_ b: [UInt8]) throws(ImageError) -> Dimensions {
        var largest: Dimensions?
        var i = 0
        var sawData = false
        while i < b.count {
            let (type, start, end) = try box(b, at: i, limit: b.count)
            if type == "meta" { largest = try findISPE(b, from: start + 4, to: end, best: largest) }
            if type == "mdat" { sawData = true }
            i = end
        }
        guard sawData else { throw ImageError("malformed HEIC (no image data)") }
        guard let largest else { throw ImageError("malformed HEIC (no image size)") }
        return largest
    }

    /// A box at `at`: its type and the range of its payload. - Throws: when it runs past `limit`.
    static func box(_ b: [UInt8], at i: Int, limit: Int) throws(ImageError) -> (type: String, start: Int, end: Int) {
        guard i + 8 <= limit else { throw ImageError("truncated HEIC (a box header runs past the end)") }
        var size = UInt64(readBE32(b, i))
        let type = String(decoding: b[(i + 4)..<(i + 8)], as: UTF8.self)
        var header = 8
        if size == 1 {
            guard i + 16 <= limit else { throw ImageError("truncated HEIC (a box header runs past the end)") }
            size = UInt64(readBE32(b, i + 8)) << 32 | UInt64(readBE32(b, i + 12))
            header = 16
        } else if size == 0 {
            size = UInt64(limit - i) // to the end
        }
        guard size >= UInt64(header), size <= UInt64(limit - i) else { throw ImageError("truncated HEIC (the \(type) box runs past the end)") }
        return (type, i + header, i + Int(size))
    }

    /// The largest `ispe` (image spatial extents) under meta/iprp/ipco: the primary image's size.
    static func findISPE(_ b: [UInt8], from: Int, to: Int, best: Dimensions?) throws(ImageError) -> Dimensions? {
        var best = best
        var i = from
        while i < to {
            let (type, start, end) = try box(b, at: i, limit: to)
            switch type {
            case "iprp", "ipco":
                best = try findISPE(b, from: start, to: end, best: best)
            case "ispe" where end - start >= 12:
                let d = Dimensions(width: readBE32(b, start + 4), height: readBE32(b, start + 8))
                if UInt64(d.width) * UInt64(d.height) > UInt64(best?.width ?? 0) * UInt64(best?.height ?? 0) { best = d }
            default:
                break
            }
            i = end
        }
        return best
    }

    // MARK: Bytes

    static func readBE32(_ b: [UInt8], _ i: Int) -> UInt32 {
        UInt32(b[i]) << 24 | UInt32(b[i + 1]) << 16 | UInt32(b[i + 2]) << 8 | UInt32(b[i + 3])
    }

    static func readLE32(_ b: [UInt8], _ i: Int) -> UInt32 {
        UInt32(b[i]) | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2]) << 16 | UInt32(b[i + 3]) << 24
    }
}
