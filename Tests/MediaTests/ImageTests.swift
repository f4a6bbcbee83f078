import FriensoProto
import FriensoTesting
@testable import Media
import Testing

extension MediaTestGroup {
    @Suite("media: image bytes") struct ImageTests {
        @Test func types_comeFromTheBytes_andDimensionsFromTheHeader() throws {
            let cases: [([UInt8], MediaV1.ImageType, UInt32, UInt32)] = [
                (Fixture.jpeg(width: 640, height: 480), .jpeg, 640, 480),
                (Fixture.png(width: 320, height: 200), .png, 320, 200),
                (Fixture.webp(width: 100, height: 50), .webp, 100, 50),
                (Fixture.heic(width: 4032, height: 3024), .heic, 4032, 3024), // the primary, not the thumbnail
            ]
            for (bytes, type, width, height) in cases {
                #expect(ImageInspector.sniff(bytes) == type)
                let size = try ImageInspector.inspect(bytes, as: type)
                #expect(size == .init(width: width, height: height), "\(type)")
            }
        }

        @Test func textNamedJPG_andOtherFormats_areNotImages() {
            for bytes in [Array("hello, this is not a photo.jpg\n".utf8), Array("GIF89a......".utf8), [0xFF, 0xD8], []] {
                #expect(ImageInspector.sniff(bytes) == nil)
            }
        }

        @Test func truncatedImages_areRefused_atEveryCut() {
            for (bytes, type) in [(Fixture.jpeg(), MediaV1.ImageType.jpeg), (Fixture.png(), .png), (Fixture.webp(), .webp), (Fixture.heic(), .heic)] {
                for cut in [bytes.count - 1, bytes.count - 2, bytes.count / 2, 40, 13] where cut < bytes.count {
                    #expect(throws: ImageError.self, "\(type) cut at \(cut)") { _ = try ImageInspector.inspect(Array(bytes.prefix(cut)), as: type) }
                }
            }
        }

        @Test func jpegGPS_isRemoved_restOfTheMetadataKept_andTheImageStillReads() throws {
            var bytes = Fixture.jpeg(gps: true)
            #expect(Fixture.contains(bytes, Fixture.gpsLatitude))
            #expect(LocationScrubber.scrub(&bytes, type: .jpeg))
            #expect(!Fixture.contains(bytes, Fixture.gpsLatitude))
            #expect(!Fixture.contains(bytes, Fixture.gpsLongitude))
            #expect(!Fixture.contains(bytes, [0x01, 0x00, 0x02, 0x00, 0x02, 0x00, 0x00, 0x00, 0x4E]), "LatitudeRef entry gone")
            #expect(!Fixture.contains(bytes, [0x25, 0x88, 0x04, 0x00]), "IFD0 no longer points at a GPS directory")
            let tiff = try #require((0..<bytes.count - 8).first { bytes[$0..<($0 + 4)].elementsEqual([0x49, 0x49, 0x2A, 0x00]) })
            #expect(bytes[tiff + 8] == 1 && bytes[tiff + 9] == 0, "IFD0 has one entry left (Orientation)")
            // Orientation (tag 0x0112, value 6) is still there, and the file still parses.
            #expect(Fixture.contains(bytes, [0x12, 0x01, 0x03, 0x00, 0x01, 0x00, 0x00, 0x00, 0x06, 0x00]))
            #expect(try ImageInspector.inspect(bytes, as: .jpeg) == .init(width: 640, height: 480))
            #expect(!LocationScrubber.scrub(&bytes, type: .jpeg), "nothing left to remove")
        }

        @Test func xmpWithGPS_isDropped_andPhotosWithoutLocation_areUntouched() throws {
            var xmp = Fixture.jpeg(gps: false, xmpGPS: true)
            #expect(LocationScrubber.scrub(&xmp, type: .jpeg))
            #expect(!Fixture.contains(xmp, Array("GPSLatitude".utf8)))
            #expect(try ImageInspector.inspect(xmp, as: .jpeg).width == 640)
            let clean = Fixture.jpeg(gps: false)
            var copy = clean
            #expect(!LocationScrubber.scrub(&copy, type: .jpeg))
            #expect(copy == clean)
        }

        @Test func pngAndHEIC_exifGPS_isRemovedToo() throws {
            var png = Fixture.png(exif: true)
            #expect(LocationScrubber.scrub(&png, type: .png))
            #expect(!Fixture.contains(png, Fixture.gpsLatitude))
            // The eXIf chunk's CRC was rewritten: the file is still a valid PNG chunk stream.
            let chunks = try ImageInspector.pngChunks(png)
            let exif = try #require(chunks.first { $0.type == "eXIf" })
            let crc = ImageInspector.readBE32(png, exif.at + 8 + exif.dataLength)
            #expect(crc == CRC32.checksum(png[(exif.at + 4)..<(exif.at + 8 + exif.dataLength)]))
            var heic = Fixture.heic()
            #expect(LocationScrubber.scrub(&heic, type: .heic))
            #expect(!Fixture.contains(heic, Fixture.gpsLatitude))
            #expect(try ImageInspector.inspect(heic, as: .heic).width == 4032)
        }
    }
}
