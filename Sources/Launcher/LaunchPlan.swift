import Foundation
public import ServiceKit
import Wire

/// Which processes to start, with which arguments, from the deployment's configuration.
public struct LaunchPlan: Sendable {
    /// The members clients reach over ZeroMQ, in start order (the gateway last: it routes to the
    /// others); each answers `<name>.Ping` through the gateway.
    public static let zeroMQMembers = ["accounts", "social", "geo", "alerts", "media", "gateway"]
    /// Every member, in start order: then the HTTP edge (probed with `GET /v1/health`).
    public static let defaultOrder = zeroMQMembers + ["edge"]
    /// The members with a PUB socket (those the embedded defaults give an event endpoint).
    public static let publishers = Defaults.eventEndpoints.keys.sorted()

    public var children: [ChildSpec]
    /// The keyring folder every child was handed (nil with `--insecure-plaintext`).
    public var keyringFolder: String?

    /// - Parameters:
    ///   - options: passed on to every child (config file, data dir, log level, plaintext flag).
    ///   - keyringFolder: the deployment keyring; made (or completed) here when missing.
    /// - Throws: `ConfigError` when an executable is missing or the keyring cannot be made or read.
    public init(resolved: ResolvedOptions, options: ServiceOptions, binDirectory: String, keyringFolder folderName: String) throws {
        let names = resolved.config.launch ?? Self.defaultOrder
        let entries = try names.map(Self.entry)
        var shared: [String] = []
        if let config = options.config ?? resolved.environment["FRIENSO_CONFIG"] { shared += ["--config", config] }
        if let dataDir = options.dataDir { shared += ["--data-dir", dataDir] }
        if let level = options.logLevel { shared += ["--log-level", level] }
        // Every member learns every endpoint of the deployment (what this launcher starts) from
        // the launcher, so none falls back to a default for a peer (services refuse to).
        var environment: [String: String] = [:]
        for member in Set(entries.map(\.member)) {
            environment["FRIENSO_\(member.uppercased())_ENDPOINT"] = resolved.deploymentEndpoint(of: member)
            if Self.publishers.contains(member) {
                environment["FRIENSO_\(member.uppercased())_EVENTS"] = resolved.deploymentEventEndpoint(of: member)
            }
        }
        let plane: InternalPlane
        if resolved.insecurePlaintext {
            shared.append("--insecure-plaintext")
            plane = .plaintext
            keyringFolder = nil
        } else {
            let folder = URL(fileURLWithPath: folderName).standardizedFileURL.path
            try KeyringFiles.ensure(at: folder)
            environment["FRIENSO_KEYRING"] = folder
            plane = InternalPlane(keyring: try KeyringFiles.load(at: folder, member: "launcher"))
            self.keyringFolder = folder
        }
        // The gateway's client socket faces clients: the probe trusts its public key, when it has one.
        let gatewayClientKey = try resolved.gatewayClientSecretKey().map { try CurveKeys.publicKey(forSecret: $0) }
        children = try entries.map { entry in
            let name = entry.member
            let executable = "\(binDirectory)/frienso-\(name)"
            guard FileManager.default.isExecutableFile(atPath: executable) else {
                throw ConfigError("no executable for \(name) at \(executable): build it first (swift build)")
            }
            // The readiness probe pings with the launcher's key; the gateway's client socket admits
            // any client (its own CurveZMQ key when configured); the edge answers HTTP.
            let probe: ClientSecurity = switch name {
            case "gateway": gatewayClientKey.map { .curve(serverPublicKey: $0, keys: nil) } ?? .plaintext
            case "edge": .plaintext // probed over HTTP
            default: try plane.client(of: name)
            }
            let listed = EndpointList.split(resolved.deploymentEndpoint(of: name))
            guard entry.instance <= max(1, listed.count) else {
                throw ConfigError("launch names \(entry.name), but endpoints.\(name) lists \(listed.count) instance(s)")
            }
            let endpoint = listed.isEmpty ? resolved.deploymentEndpoint(of: name) : listed[entry.instance - 1]
            return ChildSpec(name: entry.name, executable: executable,
                             arguments: shared + (listed.count > 1 ? ["--instance", "\(entry.instance)"] : []), endpoint: endpoint,
                             environment: environment, probe: probe, speaksHTTP: name == "edge",
                             scrapeToken: plane.scrapeToken(member: name),
                             trustedCertificateFile: name == "edge" ? resolved.config.edge?.tlsCertificateFile : nil, member: name)
        }
    }

    /// One entry of `launch`: a member (its first instance), or `<member>#<n>`, its n-th
    /// (the n-th endpoint of its list; another host runs the others).
    struct Entry {
        var name: String
        var member: String
        var instance: Int
    }

    static func entry(_ text: String) throws -> Entry {
        let parts = text.split(separator: "#", omittingEmptySubsequences: false)
        guard let member = parts.first.map(String.init), defaultOrder.contains(member), parts.count <= 2 else {
            throw ConfigError("launch: \"\(text)\" is not a member (\(defaultOrder.joined(separator: ", ")), optionally with #<instance>)")
        }
        guard parts.count == 2 else { return Entry(name: member, member: member, instance: 1) }
        guard let instance = Int(parts[1]), instance >= 1 else { throw ConfigError("launch: \"\(text)\": the instance is a number from 1") }
        return Entry(name: instance == 1 ? member : text, member: member, instance: instance)
    }
}
