import Foundation
import FriensoTesting
@testable import frienso_geo
import Geo
import ServiceKit
import Storage
import Testing

/// The example configs in `deploy/`.
enum ExampleConfigs {
    static let oneHost = Repository.root.appendingPathComponent("deploy/frienso.example.json").path
    static let hosts = Repository.root.appendingPathComponent("deploy/frienso.hosts.example.json").path
}

@Suite("geo: the deployment config")
struct GeoConfigTests {
    static let example = ExampleConfigs.oneHost

    @Test("the example config's geo section is what the defaults say; the fold's period is read and bounded")
    func geoSection() throws {
        let example = GeoConfig(resolved: try ServiceOptions.parse(["--config", Self.example]).resolve(service: "geo", environment: [:]))
        let defaults = GeoConfig()
        #expect(example.foldPeriod == defaults.foldPeriod && example.foldPeriod == .seconds(10))
        #expect(example.auditRetention == defaults.auditRetention && example.venueMinimumPeople == defaults.venueMinimumPeople)
        #expect(example.historyRetention == defaults.historyRetention && example.checkInLifetime == defaults.checkInLifetime)
        let temp = try TemporaryDirectory("frienso-geo-config")
        defer { temp.remove() }
        for (given, expected) in [(30.0, Duration.seconds(30)), (0, .seconds(1)), (100_000, .seconds(300))] {
            let path = "\(temp.path)/c.json"
            try #"{"geo": {"foldPeriodSeconds": \#(given)}}"#.write(toFile: path, atomically: true, encoding: .utf8)
            let config = GeoConfig(resolved: try ServiceOptions.parse(["--config", path]).resolve(service: "geo", environment: [:]))
            #expect(config.foldPeriod == expected, "\(given)")
        }
    }

    @Test("every key in the example configs is one the services read (a misspelt key would be ignored silently)",
          arguments: [ExampleConfigs.oneHost, ExampleConfigs.hosts])
    func exampleKeysAreKnown(file: String) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: file))
        let given = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let config = try JSONDecoder().decode(FriensoConfig.self, from: data)
        let read = try #require(try JSONSerialization.jsonObject(with: try JSONEncoder().encode(config)) as? [String: Any])
        #expect(Set(given.keys) == Set(read.keys))
        for (section, value) in given {
            guard let keys = (value as? [String: Any])?.keys else { continue }
            // What the section's type holds: its properties (a key given as null decodes to nil
            // and is not encoded again, but is still known).
            let holder = Mirror(reflecting: config).children.first { $0.label == section }?.value
            let unwrapped = holder.flatMap { Mirror(reflecting: $0).displayStyle == .optional ? Mirror(reflecting: $0).children.first?.value : $0 }
            let known = Set(unwrapped.map { Mirror(reflecting: $0).children.compactMap(\.label) } ?? [])
                .union((read[section] as? [String: Any])?.keys.map { $0 } ?? [])
            #expect(Set(keys).subtracting(known).isEmpty, "\(section): \(Set(keys).subtracting(known).sorted()) not read")
        }
    }

    @Test("the several-hosts example: every member on a host address, every service on PostgreSQL over checked TLS")
    func hostsExample() throws {
        let config = try JSONDecoder().decode(FriensoConfig.self, from: Data(contentsOf: URL(fileURLWithPath: ExampleConfigs.hosts)))
        let endpoints = try #require(config.endpoints)
        #expect(Set(endpoints.keys) == Set(KeyringFiles.members.filter { $0 != "launcher" }))
        for (member, endpoint) in endpoints.merging(config.eventEndpoints ?? [:], uniquingKeysWith: { a, _ in a }) {
            #expect(!endpoint.contains("127.0.0.1") && !endpoint.contains("localhost"), "\(member): \(endpoint)")
        }
        for service in ["accounts", "social", "geo", "alerts", "media"] {
            let storage = try #require(config.storage(for: service))
            #expect(storage.kind == "postgres" && storage.passwordFile != nil)
            let settings = try PostgresSettings(url: try #require(storage.url), schema: service)
            #expect(settings.password == nil && settings.tls == .require && settings.caFile == "/etc/frienso/postgres-ca.pem" && settings.host == "10.0.1.10")
        }
    }
}
