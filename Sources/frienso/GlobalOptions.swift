import ArgumentParser
import Foundation
import FriensoClient
import Logging
import Wire

let defaultGateway = FriensoClient.defaultGateway

/// Options every command takes.
struct GlobalOptions: ParsableArguments {
    @Option(help: "Gateway endpoint, or several gateways comma-separated (calls go to those that answer) (env FRIENSO_GATEWAY).")
    var gateway: String?

    @Flag(help: "Print JSON (protobuf's canonical mapping) instead of text.")
    var json = false

    @Option(help: "Where the session is kept (env FRIENSO_CONFIG_DIR; default ~/.config/frienso).")
    var configDir: String?

    @Option(help: "Seconds to wait for a reply.")
    var timeout: Double = 10

    @Option(help: "The gateway's CurveZMQ public key, when it uses one (env FRIENSO_GATEWAY_PUBLIC_KEY).")
    var serverKey: String?

    func validate() throws {
        guard timeout > 0, timeout <= 120 else { throw ValidationError("--timeout must be between 0 and 120 seconds") }
    }

    var environment: [String: String] { ProcessInfo.processInfo.environment }

    var sessionFile: SessionFile {
        let dir = configDir ?? environment["FRIENSO_CONFIG_DIR"]
            ?? environment["XDG_CONFIG_HOME"].map { "\($0)/frienso" }
            ?? "\(NSHomeDirectory())/.config/frienso"
        return SessionFile(directory: dir)
    }

    var gatewayEndpoint: String {
        gateway ?? environment["FRIENSO_GATEWAY"] ?? sessionFile.load()?.gateway ?? defaultGateway
    }

    /// A client with the stored session's token, if one is stored for this gateway.
    func client(requireSession: Bool = false) throws -> FriensoClient {
        let endpoint = gatewayEndpoint
        let stored = sessionFile.load()
        let token = stored?.gateway == endpoint ? stored?.token ?? "" : ""
        if requireSession && token.isEmpty {
            throw CLIError(RPCError.unauthenticated("not logged in to \(endpoint): run `frienso login`"))
        }
        var options = ClientOptions()
        options.defaultDeadline = .milliseconds(Int(timeout * 1000))
        options.failFastWhenPeerDown = false
        options.security = (serverKey ?? environment["FRIENSO_GATEWAY_PUBLIC_KEY"]).map { .curve(serverPublicKey: $0, keys: nil) } ?? .plaintext
        var logger = Logger(label: "frienso") { _ in SwiftLogNoOpLogHandler() }
        logger.logLevel = .critical
        return FriensoClient(gateway: endpoint, token: token, options: options, retryUnavailable: true, logger: logger)
    }
}
