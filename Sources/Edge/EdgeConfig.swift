import Foundation
public import Gateway
import ServiceKit

/// How the HTTP edge listens, and what it lets in.
public struct EdgeConfig: Sendable {
    /// The front door's rules and the deployment it reaches (services, event sources, keyring,
    /// rate limits): the same configuration type the ZeroMQ gateway runs on.
    public var core: GatewayConfig
    /// Where to listen: `http://host:port`, `https://host:port` or `tcp://host:port` (port 0: any).
    public var listen: String
    /// PEM files of the TLS certificate chain and its private key; both or neither.
    public var tlsCertificateFile: String?
    public var tlsKeyFile: String?
    /// Origins a browser may call from (`https://app.example.org`); none by default, so only the
    /// edge's own web app (same origin) can.
    public var corsOrigins: [String] = []
    /// Largest JSON request body.
    public var maxJSONBytes: Int = 1 << 20
    /// Largest photo body (`PUT /v1/photos`); media refuses past its own cap too.
    public var maxPhotoBytes: Int = 16 << 20
    /// How long a request may take through the deployment before DEADLINE_EXCEEDED.
    public var requestTimeout: Duration = .seconds(10)
    /// How often a WebSocket client gets a heartbeat frame.
    public var heartbeat: Duration = .seconds(15)
    /// How often a WebSocket client is pinged; a client whose pong has not come by the next ping is
    /// closed (swift-websocket's rule: the period is also the pong's deadline). The heartbeat's
    /// period, but never under 10 s: a client whose pong took over a second (a slow network, a busy
    /// phone) was cut off when the heartbeat was set to 1 s (an end-to-end test on a starved CI run).
    public var pingPeriod: Duration { max(heartbeat, .seconds(10)) }
    /// Live events kept per user for resuming, and how long after the user's last connection.
    public var resumeEvents: Int = 1_024

    /// The web app's folder, served at `/` (default: the one built into the edge; nil: none).
    public var webRoot: String? = EdgeConfig.bundledWebApp

    /// The web app as built into the edge (`Sources/Edge/WebApp`, a SwiftPM resource).
    public static var bundledWebApp: String? { Bundle.module.resourceURL?.appendingPathComponent("WebApp").path }

    public init(core: GatewayConfig, listen: String) {
        self.core = core
        self.listen = listen
    }

    /// Host and port from `listen`.
    /// - Throws: `EdgeConfigError` when it is not `scheme://host:port`.
    public func address() throws(EdgeConfigError) -> (host: String, port: Int) {
        guard let address = EndpointAddress.hostAndPort(listen) else {
            throw EdgeConfigError("the edge's listen address \"\(listen)\" is not scheme://host:port")
        }
        return address
    }
}

public struct EdgeConfigError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
