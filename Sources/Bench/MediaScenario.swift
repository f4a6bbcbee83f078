import Accounts
import Foundation
import FriensoClient
import FriensoProto
public import Logging
import Media
import PostgresHarness
import ServiceKit
import Storage
import ServiceLifecycle
import Synchronization
import Wire

/// Photos through the gateway: 1 MiB uploads and downloads at 8 in flight (aggregate MiB/s), and
/// small requests from another client while an 8 MiB download is in flight (their p99, against
/// the same requests with nothing big in flight, in the same run).
public enum MediaScenario {
    public struct Options: Sendable {
        public var inFlight = 8
        /// Upload + download pairs per client.
        public var rounds = 32
        public var smallRequests = 2_000
        /// The service's chunk size (bytes a request or reply carries).
        public var chunkBytes = 1 << 20
        public var parts: Set<String> = MediaScenario.parts
        /// Where media keeps photos, one run each in order: `sqlite` (files, as `deploy/up`) or
        /// `postgres` (bytes in a PostgreSQL server the bench starts).
        public var storages: [String] = ["sqlite"]
        public static let knownStorages = ["sqlite", "postgres"]
        public init(inFlight: Int = 8, rounds: Int = 32, smallRequests: Int = 2_000, chunkBytes: Int = 1 << 20, parts: Set<String> = MediaScenario.parts,
                    storages: [String] = ["sqlite"]) {
            self.storages = storages
            self.chunkBytes = chunkBytes
            self.inFlight = inFlight
            self.rounds = rounds
            self.smallRequests = smallRequests
            self.parts = parts
        }
    }

    public static let parts: Set<String> = ["throughput", "isolation"]

    /// Geo and social stand-ins: every place exists, nobody is blocked (venue photos are read by
    /// any signed-in user, so neither is on the measured path).
    struct OpenPeers: MediaPeers {
        func areFriends(_ a: UInt64, _ b: UInt64) -> Bool { false }
        func blocked(_ a: UInt64, _ b: UInt64) -> Bool { false }
        func checkInAccess(viewer: UInt64, owner: UInt64) async throws -> (visible: Bool, mediaID: String) { (false, "") }
        func placeExists(_ id: UInt64) async throws -> Bool { true }
    }

    /// A JPEG's structure around `size` bytes of entropy-coded filler that `seed` makes unique
    /// (so nothing is deduplicated: every upload writes its bytes).
    static func photo(size: Int, seed: UInt64) -> [UInt8] {
        var b: [UInt8] = [0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x11, 8, 0x0B, 0xB8, 0x0F, 0xA0, 3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1,
                          0xFF, 0xDA, 0x00, 0x0C, 3, 1, 0, 2, 0x11, 3, 0x11, 0, 0x3F, 0]
        var x = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        b.reserveCapacity(size)
        while b.count < size - 2 {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17
            let byte = UInt8(truncatingIfNeeded: x)
            b.append(byte == 0xFF ? 0xFE : byte)
        }
        return b + [0xFF, 0xD9]
    }

    public static func run(_ options: Options, logger: Logger) async throws -> String {
        let postgres = options.storages.contains("postgres")
            ? try await Task.detached { try LocalPostgresServer.start(prefix: "frienso-bench-media-pg") }.value : nil
        defer { postgres?.stop() }
        var sections: [String] = []
        var rates: [String: Double] = [:]
        for storage in options.storages {
            let (text, rate) = try await run(options, storage: storage, postgres: postgres, logger: logger)
            sections.append(options.storages.count > 1 ? "### media on \(storage == "sqlite" ? "SQLite (files)" : "PostgreSQL (bytea)")\n\n\(text)" : text)
            rates[storage] = rate
        }
        if let files = rates["sqlite"], let database = rates["postgres"], files > 0 {
            sections.append(String(format: "- PostgreSQL against SQLite, same run: %.0f against %.0f MiB/s aggregate (**%.2f×**)", database, files, database / files))
        }
        return sections.joined(separator: "\n\n")
    }

    /// One run on `storage`. - Returns: its report, and the aggregate MiB/s of the throughput part.
    static func run(_ options: Options, storage: String, postgres: LocalPostgresServer?, logger: Logger) async throws -> (String, Double?) {
        let dir = BenchStack.scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for sub in ["accounts", "media"] { try FileManager.default.createDirectory(atPath: "\(dir)/\(sub)", withIntermediateDirectories: true) }
        var quiet = logger
        quiet.logLevel = .warning
        let (ac, ar) = (ZMQContext(), Reactor(name: "bench-accounts"))
        let (mc, mr) = (ZMQContext(), Reactor(name: "bench-media"))
        let (cc, cr) = (ZMQContext(), Reactor(name: "bench-clients"))
        let accounts = try AccountsService(directory: "\(dir)/accounts", config: BenchStack.accountsConfig())
            .makeHost(options: HostOptions(name: "accounts", endpoint: "tcp://127.0.0.1:*"), logger: quiet, context: ac, reactor: ar)
        var config = MediaConfig()
        config.quotaBytes = 1 << 40
        config.uploadsPerHour = 1_000_000
        config.chunkBytes = options.chunkBytes
        let engine: StorageEngine
        if storage == "postgres", let postgres {
            let settings = try PostgresSettings(url: postgres.url(database: try postgres.createDatabase("media")), schema: "media")
            engine = .postgres(try await PostgresServiceDatabase.open(settings, logger: quiet))
        } else {
            engine = .sqlite(directory: "\(dir)/media")
        }
        do {
            let result = try await run(options, media: try await MediaService.open(engine, peers: OpenPeers(), config: config, logger: quiet),
                                       accounts: accounts, contexts: (mc, mr, cc, cr), logger: quiet)
            await engine.close()
            return result
        } catch {
            await engine.close()
            throw error
        }
    }

    static func run(_ options: Options, media: MediaService, accounts: ServiceHost, contexts: (ZMQContext, Reactor, ZMQContext, Reactor),
                    logger quiet: Logger) async throws -> (String, Double?) {
        let (mc, mr, cc, cr) = contexts
        var out: [String] = []
        var throughput: Double?
        let mediaHost = media.makeHost(options: HostOptions(name: "media", endpoint: "tcp://127.0.0.1:*"), logger: quiet, context: mc, reactor: mr)
        let services = ServiceGroup(configuration: .init(services: [.init(service: accounts), .init(service: mediaHost)], logger: quiet))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await services.run() }
            let (gateway, gatewayGroup) = BenchStack.gateway(services: ["accounts": try await accounts.boundEndpoint(),
                                                                        "media": try await mediaHost.boundEndpoint()], logger: quiet)
            tasks.addTask { try await gatewayGroup.run() }
            let endpoint = try await gateway.boundEndpoint()
            var clients: [FriensoClient] = []
            for i in 0...options.inFlight {
                // Each client its own context and reactor, as separate phones would be.
                clients.append(try await BenchStack.user("bench_p\(i)", number: i, gateway: endpoint, logger: quiet,
                                                         context: i == 0 ? cc : ZMQContext(), reactor: i == 0 ? cr : Reactor(name: "bench-c\(i)")).client)
            }
            let small = clients[0], movers = Array(clients.dropFirst())

            if options.parts.contains("throughput") {
                let mib = 1 << 20
                // Warm-up: one pair per client.
                for (i, c) in movers.enumerated() {
                    let id = try await c.uploadPhoto(photo(size: mib, seed: UInt64(1_000_000 + i)), purpose: .venue, placeID: 1).item?.mediaId ?? ""
                    _ = try await c.downloadPhoto(id)
                }
                let start = ContinuousClock.now
                let rounds = options.rounds
                let (up, down) = try await withThrowingTaskGroup(of: (LatencyStats, LatencyStats).self) { group in
                    for (i, c) in movers.enumerated() {
                        // Made before the clock runs; each round changes a few bytes so nothing is deduplicated.
                        let base = photo(size: mib, seed: UInt64(i * 100_000))
                        group.addTask {
                            var up = LatencyStats(name: "upload 1 MiB (start, chunk, finish) via gateway", inFlight: movers.count)
                            var down = LatencyStats(name: "download 1 MiB via gateway", inFlight: movers.count)
                            var bytes = base
                            for r in 0..<rounds {
                                withUnsafeBytes(of: UInt64(r).littleEndian) { for (k, b) in $0.enumerated() { bytes[1_000 + k] = b == 0xFF ? 0xFE : b } }
                                let t0 = ContinuousClock.now
                                guard let id = try? await c.uploadPhoto(bytes, purpose: .venue, placeID: 1).item?.mediaId else { up.errors += 1; continue }
                                let t1 = ContinuousClock.now
                                up.record(t0.duration(to: t1))
                                let back = try? await c.downloadPhoto(id)
                                down.record(t1.duration(to: .now))
                                if back?.bytes.count != bytes.count { down.errors += 1 }
                            }
                            return (up, down)
                        }
                    }
                    var up = LatencyStats(name: "upload 1 MiB (start, chunk, finish) via gateway", inFlight: movers.count)
                    var down = LatencyStats(name: "download 1 MiB via gateway", inFlight: movers.count)
                    for try await (u, d) in group { up.merge(u); down.merge(d) }
                    return (up, down)
                }
                let elapsed = start.duration(to: .now)
                var (u, d) = (up, down)
                (u.elapsed, d.elapsed) = (elapsed, elapsed)
                let moved = Double(u.count + d.count) // MiB
                let rate = moved / BenchStack.seconds(elapsed)
                throughput = rate
                out.append(Report.table([u, d]))
                out.append("- chunks of \(options.chunkBytes >> 10) KiB; \(movers.count) clients in flight, \(rounds) upload+download pairs each: \(Int(moved)) MiB moved in "
                           + String(format: "%.2f s: **%.0f MiB/s** aggregate", BenchStack.seconds(elapsed), rate))
                out.append("- target: ≥ 250 MiB/s aggregate at 8 in flight")
            }

            if options.parts.contains("isolation") {
                let big = photo(size: (8 << 20) - 1_024, seed: 42)
                let bigID = try await movers[0].uploadPhoto(big, purpose: .venue, placeID: 1).item?.mediaId ?? ""
                /// Small requests from their own client, one at a time: `media.Ping` (answered by
                /// media's host: the shared sockets and reactors alone) and `media.GetUsage` (a
                /// handler with three SQLite queries).
                func smallRequests(_ label: String) async -> [LatencyStats] {
                    var ping = LatencyStats(name: "small: media.Ping, \(label)", inFlight: 1)
                    var usage = LatencyStats(name: "small: media.GetUsage, \(label)", inFlight: 1)
                    let start = ContinuousClock.now
                    for _ in 0..<options.smallRequests {
                        var t0 = ContinuousClock.now
                        if (try? await small.ping("media")) == nil { ping.errors += 1 }
                        ping.record(t0.duration(to: .now))
                        t0 = ContinuousClock.now
                        if (try? await small.call(MediaV1.MediaService.getUsage, MediaV1.GetUsageRequest())) == nil { usage.errors += 1 }
                        usage.record(t0.duration(to: .now))
                    }
                    (ping.elapsed, usage.elapsed) = (start.duration(to: .now), start.duration(to: .now))
                    return [ping, usage]
                }
                let quiet = await smallRequests("nothing else in flight")
                let downloads = Atomic<Int>(0)
                let stop = Atomic<Bool>(false)
                let mover = movers[1]
                let background = Task {
                    while !stop.load(ordering: .relaxed) {
                        if let got = try? await mover.downloadPhoto(bigID), got.bytes.count == big.count { downloads.add(1, ordering: .relaxed) }
                    }
                }
                let loaded = await smallRequests("8 MiB downloads in flight")
                stop.store(true, ordering: .relaxed)
                _ = await background.value
                out.append("")
                out.append(Report.table(quiet + loaded))
                out.append("- chunks of \(options.chunkBytes >> 10) KiB; \(downloads.load(ordering: .relaxed)) whole 8 MiB downloads by another client ran during the second row")
                out.append("- target: small-request p99 ≤ 5,000 µs with an 8 MiB download in flight (this run: Ping \(Report.f(loaded[0].micros(99))) µs, GetUsage \(Report.f(loaded[1].micros(99))) µs)")
            }

            for c in clients { await c.close() }
            await gatewayGroup.triggerGracefulShutdown()
            await services.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        return (out.joined(separator: "\n"), throughput)
    }
}
