// swift-tools-version: 6.1
import PackageDescription

/// One set of settings for every Swift target.
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    // A warning in every build's output (deploy/test prints them) for a function or expression that
    // takes the type checker more than 2 s: three test expressions took 9-12 s each of every clean
    // build before they were split into typed steps (docs/architecture.md, "Build time").
    .unsafeFlags(["-Xfrontend", "-warn-long-function-bodies=2000", "-Xfrontend", "-warn-long-expression-type-checking=2000"]),
]

/// Library products, named once.
let argumentParser: Target.Dependency = .product(name: "ArgumentParser", package: "swift-argument-parser")
let logging: Target.Dependency = .product(name: "Logging", package: "swift-log")
let serviceLifecycle: Target.Dependency = .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")
let grdb: Target.Dependency = .product(name: "GRDB", package: "GRDB.swift")
let histogram: Target.Dependency = .product(name: "Histogram", package: "hdrhistogram-swift")
let csv: Target.Dependency = .product(name: "SwiftCSV", package: "SwiftCSV")
let zip: Target.Dependency = .product(name: "ZIPFoundation", package: "ZIPFoundation")
let hummingbird: Target.Dependency = .product(name: "Hummingbird", package: "hummingbird")
let hummingbirdTLS: Target.Dependency = .product(name: "HummingbirdTLS", package: "hummingbird")
let hummingbirdWebSocket: Target.Dependency = .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket")
let wsClient: Target.Dependency = .product(name: "HummingbirdWSClient", package: "hummingbird-websocket")
let httpClient: Target.Dependency = .product(name: "AsyncHTTPClient", package: "async-http-client")
let jwt: Target.Dependency = .product(name: "JWTKit", package: "jwt-kit")
let nioSSL: Target.Dependency = .product(name: "NIOSSL", package: "swift-nio-ssl")
let nioCore: Target.Dependency = .product(name: "NIOCore", package: "swift-nio")
let coreMetrics: Target.Dependency = .product(name: "CoreMetrics", package: "swift-metrics")
let prometheus: Target.Dependency = .product(name: "Prometheus", package: "swift-prometheus")
let postgres: Target.Dependency = .product(name: "PostgresNIO", package: "postgres-nio")

let package = Package(
    name: "frienso",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "frienso", targets: ["frienso"]),
        .executable(name: "frienso-accounts", targets: ["frienso-accounts"]),
        .executable(name: "frienso-gateway", targets: ["frienso-gateway"]),
        .executable(name: "frienso-edge", targets: ["frienso-edge"]),
        .executable(name: "frienso-social", targets: ["frienso-social"]),
        .executable(name: "frienso-geo", targets: ["frienso-geo"]),
        .executable(name: "frienso-alerts", targets: ["frienso-alerts"]),
        .executable(name: "frienso-media", targets: ["frienso-media"]),
        .executable(name: "frienso-launch", targets: ["frienso-launch"]),
        .executable(name: "frienso-bench", targets: ["frienso-bench"]),
        .executable(name: "frienso-fuzz", targets: ["frienso-fuzz"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        .package(url: "https://github.com/swiftcsv/SwiftCSV", from: "0.10.0"),
        .package(url: "https://github.com/weichsel/ZIPFoundation", from: "0.9.20"),
        // The HTTP/JSON + WebSocket edge. No default traits: the edge reads its configuration
        // through ServiceKit, not swift-configuration.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: []),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // Tests only: the HTTP/2 fake APNs server, and the fake providers' own check of the
        // tokens' signatures (independent of jwt-kit, which signs them).
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        // The delivery providers' HTTP client (HTTP/1.1 and HTTP/2 over TLS), and the edge's tests'.
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        // Signed tokens for FCM's OAuth exchange (RS256) and APNs (ES256).
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.8.0"),
        // Metrics: swift-metrics is the API every module records through; swift-prometheus renders
        // a member's metrics in Prometheus's text format (issue 20).
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // PostgreSQL as a storage engine beside SQLite (issue 21).
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
    ],
    targets: [
        // C libraries from Debian.
        .systemLibrary(name: "CZeroMQ", path: "Sources/CZeroMQ"),
        .systemLibrary(name: "CSodium", path: "Sources/CSodium"),
        .systemLibrary(name: "CLinuxShims", path: "Sources/CLinuxShims"),
        // protoc-c output, committed; regenerated by proto/generate. Every product links it, so
        // its linker settings reach every link: LLVM's lld (in every Swift toolchain for Linux)
        // links the 260 MB debug test bundle in 2.7-3.0 s against gold's 6.3-9.6 s (2026-11-28),
        // and a build links twelve products (eleven executables and the test bundle).
        .target(
            name: "FriensoProtoC",
            path: "Sources/FriensoProtoC",
            linkerSettings: [.linkedLibrary("protobuf-c"), .unsafeFlags(["-use-ld=lld"])]
        ),
        // Swift value types over the C structs: glue generated by proto/generate, plus a small runtime.
        .target(name: "FriensoProto", dependencies: ["FriensoProtoC"], swiftSettings: swiftSettings),
        // Sockets, envelope, service host, Lazy Pirate client, pub/sub.
        .target(
            name: "Wire",
            dependencies: [
                "CZeroMQ", "CLinuxShims", "FriensoProto",
                logging,
                serviceLifecycle,
                coreMetrics,
            ],
            swiftSettings: swiftSettings
        ),
        // What only executables need: options, the config file, the keyring on disk, the run loop.
        .target(
            name: "ServiceKit",
            dependencies: [
                "Wire", "FriensoProto", "CSodium", "Storage",
                argumentParser,
                logging,
                serviceLifecycle,
                coreMetrics,
                prometheus,
            ],
            swiftSettings: swiftSettings
        ),
        // SQLite's process-wide settings, made by a C constructor when the process loads.
        .target(name: "CSQLiteSettings", linkerSettings: [.linkedLibrary("sqlite3")]),
        // A service's SQLite database: opening, the idempotency claim in each mutation's transaction, the reply store.
        .target(name: "Storage", dependencies: ["Wire", "FriensoProto", "CSQLiteSettings", grdb, .product(name: "GRDBSQLite", package: "GRDB.swift"), coreMetrics,
                                               postgres, logging, serviceLifecycle, nioSSL],
                swiftSettings: swiftSettings),
        // Identity helpers: SHA-256, contact identifiers, phone numbers, the operator key.
        .target(name: "Identity", dependencies: ["Wire", "CSodium"], swiftSettings: swiftSettings),
        .target(
            name: "Accounts",
            dependencies: [
                "Wire", "FriensoProto", "Storage", "Identity", "CSodium",
                grdb,
                logging,
                postgres,
                nioCore,
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Social",
            dependencies: [
                "Wire", "FriensoProto", "Storage", "Identity", "SocialReplica",
                grdb,
                logging,
                postgres,
            ],
            swiftSettings: swiftSettings
        ),
        // Live locations, visibility, the spatial index, nearby.
        .target(
            name: "Geo",
            dependencies: [
                "Wire", "FriensoProto", "Storage", "Identity", "SocialReplica", "Places",
                csv,
                grdb,
                logging,
                coreMetrics,
                serviceLifecycle,
            ],
            swiftSettings: swiftSettings
        ),
        // watchMe, helpNow, the inbox, delivery through the outbox, emergency prompts, resources.
        .target(
            name: "Alerts",
            dependencies: [
                "Wire", "FriensoProto", "Storage", "Identity", "SocialReplica", "Places",
                grdb,
                logging,
                postgres,
                coreMetrics,
                serviceLifecycle,
            ],
            swiftSettings: swiftSettings
        ),
        // Check-in photos, venue photos, profile pictures: chunked uploads, content-addressed files.
        .target(
            name: "Media",
            dependencies: [
                "Wire", "FriensoProto", "Storage", "Identity", "SocialReplica",
                grdb,
                logging,
                postgres,
                serviceLifecycle,
            ],
            swiftSettings: swiftSettings
        ),
        // Places and distances on the Earth (geo's places and maths; alerts' copy of the places
        // names where a helpNow was raised without asking geo).
        .target(
            name: "Places",
            dependencies: ["FriensoProto"],
            swiftSettings: swiftSettings
        ),
        // The Clone replicas other services embed: the social graph (geo, alerts, media, accounts)
        // and accounts' profiles (social, alerts).
        .target(
            name: "SocialReplica",
            dependencies: [
                "Wire", "FriensoProto",
                logging,
                serviceLifecycle,
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Gateway",
            dependencies: [
                "Wire", "FriensoProto", "ServiceKit",
                grdb,
                logging,
                coreMetrics,
                serviceLifecycle,
            ],
            swiftSettings: swiftSettings
        ),
        // The HTTP/JSON + WebSocket edge: the gateway's rules (GatewayCore) behind Hummingbird.
        .target(
            name: "Edge",
            dependencies: [
                "Gateway", "Wire", "FriensoProto", "ServiceKit",
                hummingbird,
                .product(name: "HummingbirdCore", package: "hummingbird"),
                hummingbirdTLS,
                hummingbirdWebSocket,
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "DequeModule", package: "swift-collections"),
                logging,
                coreMetrics,
                serviceLifecycle,
            ],
            // The web app: plain HTML, CSS and JavaScript modules, served at /.
            resources: [.copy("WebApp")],
            swiftSettings: swiftSettings
        ),
        // Typed client API over the gateway: used by the CLI, the tests and the benchmark.
        .target(name: "FriensoClient", dependencies: ["Wire", "FriensoProto"], swiftSettings: swiftSettings),
        // Benchmark scenarios (frienso-bench): load generation and HdrHistogram percentiles.
        .target(
            name: "Bench",
            dependencies: [
                "Wire", "FriensoProto", "FriensoClient", "Gateway", "Accounts", "Social", "SocialReplica", "Geo", "Alerts", "Media", "ServiceKit", "Launcher", "CZeroMQ", "CLinuxShims",
                "PostgresHarness", "Storage",
                argumentParser,
                grdb,
                histogram,
                wsClient,
                .product(name: "HTTPTypes", package: "swift-http-types"),
                logging,
                serviceLifecycle,
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Launcher",
            dependencies: [
                "Wire", "FriensoProto", "ServiceKit", "Identity", "Storage",
                grdb,
                logging,
                hummingbird,
                prometheus,
                httpClient,
                nioSSL,
                serviceLifecycle,
            ],
            swiftSettings: swiftSettings
        ),

        // Executables: thin.
        .executableTarget(
            name: "frienso-accounts",
            dependencies: [
                "Accounts", "Deliveries", "ServiceKit", "Wire", "SocialReplica",
                argumentParser,
                serviceLifecycle,
                grdb,
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "frienso-social",
            dependencies: [
                "Social", "SocialReplica", "ServiceKit", "Wire",
                argumentParser,
                grdb,
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "frienso-geo",
            dependencies: [
                "Geo", "SocialReplica", "ServiceKit", "Wire", "FriensoProto",
                argumentParser,
                coreMetrics,
                grdb,
                logging,
                serviceLifecycle,
            ],
            swiftSettings: swiftSettings
        ),
        // Real SMS, push and email providers behind alerts' provider interfaces (issue 19).
        .target(
            name: "Deliveries",
            dependencies: [
                "Alerts", "Accounts", "FriensoProto", "ServiceKit",
                httpClient, jwt, nioSSL, nioCore,
                .product(name: "NIOPosix", package: "swift-nio"),
                logging, serviceLifecycle,
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "frienso-alerts",
            dependencies: [
                "Alerts", "Deliveries", "SocialReplica", "ServiceKit", "Wire", "Storage",
                argumentParser,
                coreMetrics,
                logging,
                serviceLifecycle,
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "frienso-media",
            dependencies: [
                "Media", "SocialReplica", "ServiceKit", "Storage", "Wire",
                argumentParser,
                coreMetrics,
                logging,
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "frienso-gateway",
            dependencies: [
                "Gateway", "ServiceKit", "Wire",
                argumentParser,
                coreMetrics,
                grdb,
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "frienso-edge",
            dependencies: [
                "Edge", "Gateway", "ServiceKit", "Wire",
                argumentParser,
                coreMetrics,
                logging,
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "frienso-launch",
            dependencies: [
                "Launcher", "ServiceKit", "Deliveries", "Alerts", "FriensoProto",
                grdb,
                argumentParser,
                logging,
                serviceLifecycle,
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "frienso",
            dependencies: [
                "FriensoClient", "FriensoProto", "Wire",
                argumentParser, zip,
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "frienso-bench",
            dependencies: ["Bench"],
            swiftSettings: swiftSettings
        ),

        // The codec under libFuzzer (deploy/fuzz builds it with -sanitize=fuzzer); otherwise a replayer.
        .executableTarget(name: "frienso-fuzz", dependencies: ["FriensoProto"], swiftSettings: swiftSettings),

        // A throwaway PostgreSQL server (Debian's) for the tests and frienso-bench.
        .target(name: "PostgresHarness", dependencies: ["ServiceKit"], swiftSettings: swiftSettings),

        // Tests.
        .target(
            name: "FriensoTesting",
            dependencies: [
                "Wire", "FriensoProto", "ServiceKit", "PostgresHarness", "Storage", grdb,
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                wsClient,
                logging,
                serviceLifecycle,
            ],
            path: "Tests/FriensoTesting",
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "ProtoTests", dependencies: ["FriensoProto", "FriensoTesting"], swiftSettings: swiftSettings),
        .testTarget(
            name: "WireTests",
            dependencies: ["Wire", "FriensoProto", "FriensoTesting", "CZeroMQ",
                           logging,
                           serviceLifecycle],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AccountsTests",
            dependencies: ["Accounts", "Deliveries", "Wire", "FriensoProto", "FriensoTesting", "ServiceKit", "frienso-accounts", "Identity", "Storage",
                           logging, grdb, postgres],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SocialTests",
            dependencies: ["Social", "SocialReplica", "Accounts", "Gateway", "Wire", "FriensoProto", "FriensoClient", "FriensoTesting", "ServiceKit", "Identity", "Storage",
                           grdb,
                           logging],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GeoTests",
            dependencies: ["Geo", "Social", "SocialReplica", "Accounts", "Gateway", "Wire", "FriensoProto", "FriensoClient", "FriensoTesting",
                           "ServiceKit", "Identity", "Storage", "frienso-geo",
                           grdb,
                           logging],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AlertsTests",
            dependencies: ["Alerts", "Deliveries", "Geo", "Social", "SocialReplica", "Places", "Accounts", "Gateway", "Wire", "FriensoProto", "FriensoClient", "FriensoTesting",
                           "ServiceKit", "Identity", "Storage",
                           grdb,
                           logging,
                           serviceLifecycle],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "MediaTests",
            dependencies: ["Media", "Geo", "Social", "SocialReplica", "Accounts", "Gateway", "Wire", "FriensoProto", "FriensoClient", "FriensoTesting",
                           "ServiceKit", "Identity", "Storage",
                           grdb,
                           logging,
                           serviceLifecycle],
            swiftSettings: swiftSettings
        ),
        // Seeded mutation fuzzing of the codec, request decoding, a live host and the handlers.
        .testTarget(
            name: "FuzzTests",
            dependencies: ["Wire", "FriensoProto", "FriensoTesting", "Accounts", "Social", "SocialReplica", "Places", "Geo", "Alerts", "Media", "CLinuxShims", "CZeroMQ",
                           logging],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "ClientTests", dependencies: ["FriensoClient"], swiftSettings: swiftSettings),
        // The benchmark's own instruments (what `frienso-bench` reads from the kernel).
        .testTarget(name: "BenchTests", dependencies: ["Bench"], swiftSettings: swiftSettings),
        // The storage layer every service shares (idempotency claims).
        .testTarget(
            name: "StorageTests",
            dependencies: ["Storage", "Wire", "FriensoProto", "FriensoTesting", "PostgresHarness", grdb, logging, postgres],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GatewayTests",
            dependencies: ["Gateway", "Launcher", "Accounts", "Wire", "FriensoProto", "FriensoClient", "FriensoTesting", "ServiceKit", "Identity", "Storage",
                           logging, prometheus],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EdgeTests",
            dependencies: ["Edge", "Gateway", "Wire", "FriensoProto", "FriensoTesting"],
            swiftSettings: swiftSettings
        ),
        // Runs the executables from the build's bin folder (FRIENSO_BIN_DIR; `swift build
        // --build-tests` and `swift test` build every product) and imports none of them: as
        // dependencies they made this, the largest test module, compile after every executable
        // had, last and alone on a clean build's critical path, and linked their objects into
        // the test binary.
        .testTarget(
            name: "EndToEndTests",
            dependencies: ["FriensoClient", "Wire", "FriensoProto", "FriensoTesting", "Launcher", "ServiceKit", "Identity", "Storage", "CZeroMQ", grdb, logging,
                           wsClient, zip],
            swiftSettings: swiftSettings
        ),
    ]
)
