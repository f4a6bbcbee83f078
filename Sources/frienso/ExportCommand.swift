import ArgumentParser
import Foundation
import FriensoClient
import FriensoProto
import Wire
import ZIPFoundation

extension AccountCommand {
    /// `frienso account export -o me.zip`: every service's part of what it stores about you, as
    /// JSON (the contract's JSON mapping, docs/protocol.md § 9), and your photos as they are stored.
    struct ExportData: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "export",
            abstract: "Download everything Frienso stores about you as a zip: a JSON file per service, and your photos.",
            discussion: """
                accounts.json  your account, sessions (never their tokens), linked accounts, password resets, emails
                social.json    friends, friend requests, blocks, circle, exchanges, pokes, findable
                geo.json       sharing settings, latest fix and status, check-in, live grants, the whole location history
                alerts.json    watches, helpNow alerts (raised and received), devices, messages to or about you
                media.json     your photos' details; photos/ their bytes
                """)

        @OptionGroup var global: GlobalOptions
        @Option(name: .shortAndLong, help: "The archive to write (.zip).") var output: String
        @Flag(help: "Replace the file if it exists.") var force = false

        func run() async throws {
            let target = URL(fileURLWithPath: output)
            try await performCall(global) { client in
                if FileManager.default.fileExists(atPath: target.path) && !force {
                    throw CLIError(message: "\(output) exists: choose another name or pass --force", exitCode: 64)
                }
                var files: [(String, [UInt8])] = []
                func json(_ value: JSONValue) -> [UInt8] { Array((value.rendered(indent: 2) + "\n").utf8) }

                let accounts = try await client.call(Accounts.exportMyData, AccountsV1.ExportMyDataRequest())
                files.append(("accounts.json", json(accounts.jsonValue)))
                let social = try await client.call(SocialAPI.exportMyData, SocialV1.ExportMyDataRequest())
                files.append(("social.json", json(social.jsonValue)))
                var geo = try await client.call(GeoAPI.exportMyData, GeoV1.ExportMyDataRequest(limit: 10_000))
                var page = geo
                while page.more, let last = page.history.last {
                    page = try await client.call(GeoAPI.exportMyData, GeoV1.ExportMyDataRequest(afterHistoryId: last.id, limit: 10_000))
                    geo.history += page.history
                }
                geo.more = false
                files.append(("geo.json", json(geo.jsonValue)))
                let alerts = try await client.call(AlertsAPI.exportMyData, AlertsV1.ExportMyDataRequest())
                files.append(("alerts.json", json(alerts.jsonValue)))

                var photos: [MediaV1.MediaItem] = []
                var token = ""
                repeat {
                    let listed = try await client.call(MediaAPI.listPhotos, MediaV1.ListPhotosRequest(mine: true, limit: 100, pageToken: token))
                    photos += listed.items
                    token = listed.nextPageToken
                } while !token.isEmpty
                files.append(("media.json", json(.object([("photos", .array(photos.map(\.jsonValue)))]))))
                for item in photos {
                    let (_, bytes) = try await client.downloadPhoto(item.mediaId)
                    files.append(("photos/\(item.mediaId).\(Self.fileExtension(item.mimeType))", bytes))
                }
                files.append(("README.txt", Array(Self.readme(username: accounts.account?.profile?.username ?? "", photos: photos.count).utf8)))

                try Self.writeZip(files, to: target)
                let size = (try? FileManager.default.attributesOfItem(atPath: target.path)[.size] as? Int) ?? 0
                return ("wrote \(output): \(files.count) files (\(photos.count) photos, \(geo.history.count) history entries), \(size) bytes",
                        .object([("output", .string(output)), ("files", .array(files.map { .string($0.0) })), ("bytes", .number(Double(size)))]))
            }
        }

        static func fileExtension(_ mime: String) -> String {
            ["image/jpeg": "jpg", "image/png": "png", "image/heic": "heic", "image/webp": "webp"][mime] ?? "bin"
        }

        static func readme(username: String, photos: Int) -> String {
            """
            Everything Frienso stores about \(username), exported \(ISO8601DateFormatter().string(from: Date())).

            accounts.json  your account, sessions (never their tokens), linked accounts, password resets (never the codes), emails
            social.json    friends, friend requests, blocks, your circle and the circles you are in, exchanges, pokes, findable
            geo.json       sharing settings, your latest fix and status, check-in, live location grants, your whole location history
            alerts.json    watches and helpNow alerts (yours and those you received), devices, every message to or about you
            media.json     your \(photos) photos' details; photos/ holds their bytes as stored (GPS tags were removed at upload)

            The JSON follows Frienso's contract (proto/ in the source; docs/protocol.md § 9 and § 10):
            64-bit numbers are strings, times are milliseconds since 1970 (UTC).

            """
        }

        /// Writes the archive beside `target` and renames it into place (no half-written archive).
        static func writeZip(_ files: [(String, [UInt8])], to target: URL) throws {
            let partial = target.deletingLastPathComponent().appendingPathComponent(".\(target.lastPathComponent).partial")
            try? FileManager.default.removeItem(at: partial)
            do {
                let archive = try Archive(url: partial, accessMode: .create)
                for (path, bytes) in files {
                    let data = Data(bytes)
                    try archive.addEntry(with: path, type: .file, uncompressedSize: Int64(data.count), compressionMethod: .deflate) { position, size in
                        data.subdata(in: Int(position)..<Int(position) + size)
                    }
                }
            } catch {
                try? FileManager.default.removeItem(at: partial)
                throw CLIError(message: "cannot write \(target.path): \(error)", exitCode: 74)
            }
            _ = try? FileManager.default.removeItem(at: target)
            try FileManager.default.moveItem(at: partial, to: target)
        }
    }
}
