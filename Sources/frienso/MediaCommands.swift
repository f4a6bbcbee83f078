import ArgumentParser
import Foundation
import FriensoClient
import FriensoProto
import Wire

typealias MediaAPI = MediaV1.MediaService

/// A photo's purpose as typed on the command line.
enum PurposeArgument: String, ExpressibleByArgument, CaseIterable {
    case profile, checkIn = "check-in", venue

    var proto: MediaV1.Purpose {
        switch self {
        case .profile: .profile
        case .checkIn: .checkIn
        case .venue: .venue
        }
    }
}

func describe(_ item: MediaV1.MediaItem) -> String {
    let purpose = item.purpose.protoName.dropFirst("PURPOSE_".count).lowercased().replacingOccurrences(of: "_", with: "-")
    let type = item.type.protoName.dropFirst("IMAGE_TYPE_".count)
    return "\(item.mediaId)  \(type) \(item.width)×\(item.height)  \(byteCount(item.sizeBytes))  \(purpose)"
        + (item.placeId != 0 ? " at place \(item.placeId)" : "") + "  by user \(item.ownerId), \(formatTime(item.createdAtMs))"
}

/// 320 bytes, 54 KiB, 1.5 MiB, 256 MiB.
func byteCount(_ n: UInt64) -> String {
    func unit(_ value: Double, _ name: String) -> String {
        (value >= 10 || value == value.rounded() ? String(format: "%.0f", value) : String(format: "%.1f", value)) + " " + name
    }
    switch n {
    case ..<1_024: return "\(n) bytes"
    case ..<(1 << 20): return unit(Double(n) / 1_024, "KiB")
    case ..<(1 << 30): return unit(Double(n) / 1_048_576, "MiB")
    default: return unit(Double(n) / 1_073_741_824, "GiB")
    }
}

/// The file's bytes; a file far over any photo cap is refused before it is read.
func readPhoto(_ path: String) throws -> [UInt8] {
    let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? nil
    guard let size else { throw CLIError(message: "cannot read \(path)", exitCode: 2) }
    guard size <= 64 << 20 else { throw CLIError(message: "\(path) is \(byteCount(UInt64(size))): far over the photo size limit", exitCode: 2) }
    guard let data = FileManager.default.contents(atPath: path) else { throw CLIError(message: "cannot read \(path)", exitCode: 2) }
    return Array(data)
}

func uploadText(_ reply: MediaV1.FinishUploadResponse) -> String {
    var lines = ["uploaded \(reply.item.map(describe) ?? "?")"]
    if reply.locationRemoved { lines.append("  location metadata (GPS) was removed before storing") }
    if reply.deduplicated { lines.append("  the same bytes were already stored: no new space used") }
    if !reply.replacedMediaId.isEmpty { lines.append("  replaced \(reply.replacedMediaId)") }
    return lines.joined(separator: "\n")
}

struct Photo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Photos: upload, list, get, delete; your storage use.",
        subcommands: [Upload.self, List.self, Get.self, Delete.self, Usage.self])

    struct Upload: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Upload a JPEG, PNG, HEIC or WebP (GPS location is removed from it).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The image file.") var file: String
        @Option(help: "profile, check-in or venue (default: venue with --venue).") var purpose: PurposeArgument?
        @Option(help: "The place id of a venue photo (see `frienso places`, `frienso venues`).") var venue: UInt64 = 0

        func validate() throws {
            guard purpose != nil || venue != 0 else { throw ValidationError("give --purpose (profile, check-in) or --venue ID") }
        }

        func run() async throws {
            let bytes = try readPhoto(file)
            try await performCall(global) { client in
                let reply = try await client.uploadPhoto(bytes, purpose: (purpose ?? .venue).proto, placeID: venue)
                return (uploadText(reply), reply.jsonValue)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Photos of a venue (newest first), of a check-in, a profile picture, or yours.")
        @OptionGroup var global: GlobalOptions
        @Option(help: "A place id.") var venue: UInt64 = 0
        @Option(help: "A user id: the photo of their current check-in.") var checkInOf: UInt64 = 0
        @Option(help: "A user id: their profile picture.") var profileOf: UInt64 = 0
        @Flag(help: "Your own uploads.") var mine = false
        @Option var limit: UInt32 = 0
        @Option(help: "The next page's token from the previous listing.") var page = ""

        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(MediaAPI.listPhotos, MediaV1.ListPhotosRequest(
                    placeId: venue, checkInOf: checkInOf, profileOf: profileOf, mine: mine, limit: limit, pageToken: page))
                var lines = reply.items.isEmpty ? ["no photos you may see"] : reply.items.map(describe)
                if !reply.nextPageToken.isEmpty { lines.append("more: --page \(reply.nextPageToken)") }
                return (lines.joined(separator: "\n"), reply.jsonValue)
            }
        }
    }

    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Download a photo you may see.")
        @OptionGroup var global: GlobalOptions
        @Argument var id: String
        @Option(name: .shortAndLong, help: "Where to write it.") var output: String

        func run() async throws {
            try await performCall(global) { client in
                let (item, bytes) = try await client.downloadPhoto(id)
                do {
                    try Data(bytes).write(to: URL(fileURLWithPath: output), options: .atomic)
                } catch {
                    throw CLIError(message: "cannot write \(output): \(error.localizedDescription)", exitCode: 2)
                }
                return ("wrote \(output): \(describe(item))", item.jsonValue)
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete one of your photos.")
        @OptionGroup var global: GlobalOptions
        @Argument var id: String

        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(MediaAPI.deletePhoto, MediaV1.DeletePhotoRequest(mediaId: id), mutation: true)
                return ("deleted \(id)" + (reply.bytesReleased ? " (storage released)" : " (the same bytes are still held by another photo)"), reply.jsonValue)
            }
        }
    }

    struct Usage: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Your storage use and upload rate against the limits.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await performCall(global) { client in
                let u = try await client.call(MediaAPI.getUsage, MediaV1.GetUsageRequest())
                return ("""
                    storage   \(byteCount(u.usedBytes)) of \(byteCount(u.quotaBytes))
                    uploads   \(u.uploadsLastHour) in the last hour (at most \(u.uploadsPerHour))
                    largest   \(byteCount(u.maxPhotoBytes)) a photo
                    """, u.jsonValue)
            }
        }
    }
}
