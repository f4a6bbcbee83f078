import Foundation

/// The deployment's configuration file (JSON). Every field is optional: what is missing falls back
/// to the environment, then to the embedded defaults. Flags override everything.
public struct FriensoConfig: Codable, Sendable {
    public var dataDir: String?
    public var logLevel: String?
    /// "text" (default) or "json": one JSON object per line (request id, method; the caller's
    /// user id only at debug and trace).
    public var logFormat: String?
    /// The launcher rotates each member's log (`run/logs/<name>.log`) when it passes this size
    /// (default 64 MiB), keeping this many older files (`.1` the newest; default 5).
    public var logMaxBytes: Int?
    public var logKeep: Int?
    /// Where the launcher serves the whole deployment's metrics for Prometheus (`host:port`;
    /// default `127.0.0.1:9100`, port 0 for any free port, `off` for none). Env FRIENSO_METRICS_LISTEN.
    public var metricsListen: String?
    /// Request endpoints by service name: `gateway`, `accounts`, `social`, `geo`, `alerts`, `media`;
    /// and the HTTP edge's listen address, `edge`.
    public var endpoints: [String: String]?
    /// Event (PUB) endpoints by service name.
    public var eventEndpoints: [String: String]?
    public var accounts: AccountsSection?
    public var gateway: GatewaySection?
    public var social: SocialSection?
    public var geo: GeoSection?
    public var alerts: AlertsSection?
    public var media: MediaSection?
    public var edge: EdgeSection?
    /// What the launcher starts, in order (default: accounts, social, geo, alerts, media, then the gateway).
    public var launch: [String]?
    /// The deployment keyring folder (default: `keys` in the launcher's run folder).
    public var keyring: String?
    /// Where every service keeps its data (default: SQLite files in `dataDir`); a service's own
    /// `storage` (in its section) overrides it. See `StorageSection`.
    public var storage: StorageSection?

    public struct AccountsSection: Codable, Sendable {
        /// This service's storage, over the deployment's `storage`.
        public var storage: StorageSection?
        public var sessionTTLSeconds: Int?
        public var maxFailedLoginsPerAccount: Int?
        public var maxFailedLoginsPerClient: Int?
        /// Distinct accounts one address may fail on within `sprayWindowSeconds` (default 10 an hour).
        public var maxAccountsFailedPerClient: Int?
        /// The window the per-account and per-client counts look back over (default 900 s).
        public var failedLoginWindowSeconds: Double?
        public var sprayWindowSeconds: Double?
        /// The first lockout (default 30 s), doubling per further failure up to the maximum (default 1 h).
        public var lockoutSeconds: Double?
        public var maxLockoutSeconds: Double?
        /// A deleted account's data is erased by every service twice: at once, and this long
        /// after (default 30 s), for requests that were in flight when it was deleted.
        public var erasureRecheckSeconds: Double?
        /// Where emails (password reset codes) go: the built-in recorder (default), SMTP or a webhook.
        public var email: EmailSection?
        /// How long an email that was sent or failed for good is kept in the outbox, with the
        /// built-in recorder's copy (default 90).
        public var emailRetentionDays: Int?

        public init() {}
    }

    /// Email provider. The password and tokens are read from the files named here.
    public struct EmailSection: Codable, Sendable {
        /// "recording" (default: nothing leaves the machine), "smtp" or "webhook".
        public var provider: String?
        /// SMTP: the relay, its port (default 587), "starttls" (default), "tls" (port 465) or
        /// "none" (a relay on 127.0.0.1 only), the login and the file holding its password, the
        /// From address (`Frienso <no-reply@example.org>`) and the EHLO name (default: From's domain).
        public var host: String?
        public var port: Int?
        public var security: String?
        public var username: String?
        public var passwordFile: String?
        public var from: String?
        public var heloName: String?
        /// Webhook: its URL and a file holding the bearer token (optional).
        public var url: String?
        public var bearerTokenFile: String?
        /// A PEM file of CA certificates trusted besides the system's.
        public var caFile: String?
        public init() {}
    }

    public struct SocialSection: Codable, Sendable {
        /// This service's storage, over the deployment's `storage`.
        public var storage: StorageSection?
        /// How many people a core circle holds (default 3).
        public var circleLimit: Int?

        public init() {}
    }

    public struct GeoSection: Codable, Sendable {
        /// This service's storage, over the deployment's `storage`.
        public var storage: StorageSection?
        public var nearbyDefaultRadiusMetres: Double?
        public var nearbyMaxRadiusMetres: Double?
        public var historyRetentionDays: Int?
        public var aroundMetres: Double?
        public var venueFreshMinutes: Int?
        /// Venue totals below this are shown as "fewer than k" (default 3).
        public var venueMinimumPeople: Int?
        /// How long "who saw my location" is kept (default 30 days).
        public var auditRetentionDays: Int?
        public var checkInHours: Int?
        /// How long the history fold takes to sweep what committed (default 10 s, 1-300): longer
        /// writes each `latest` page less often, and replays a longer tail at start.
        public var foldPeriodSeconds: Double?
        /// Authorises operator imports (places). Or FRIENSO_OPERATOR_KEY.
        public var operatorKey: String?

        public init() {}
    }

    public struct AlertsSection: Codable, Sendable {
        /// This service's storage, over the deployment's `storage`.
        public var storage: StorageSection?
        /// Bounds of a watch session (default 300 s to 12 h).
        public var minWatchSeconds: Int?
        public var maxWatchSeconds: Int?
        /// Check-in timers: the shortest and longest (default 300 s to 24 h), and how long before
        /// the end the warning goes (default 120 s).
        public var minTimerSeconds: Int?
        public var maxTimerSeconds: Int?
        public var timerWarningSeconds: Int?
        /// A helpNow nobody accepted within this is sent again and escalated (default 5).
        public var helpEscalationMinutes: Double?
        /// The number a helpNow suggests (default 911), and campus police's, suggested instead
        /// when the caller's last fix is at a campus place.
        public var emergencyNumber: String?
        public var campusPoliceNumber: String?
        public var campusPoliceLabel: String?
        /// Attempts per delivery before it is marked failed (default 6).
        public var deliveryMaxAttempts: Int?
        public var inviteLink: String?
        /// Authorises operator methods (outbox, resource imports, resolving any alert). Or FRIENSO_OPERATOR_KEY.
        public var operatorKey: String?
        /// How long a delivery that ended is kept in the outbox, with its attempts (default 90).
        public var outboxRetentionDays: Int?
        /// How long a delivery pass of one instance holds the outbox rows it took, on PostgreSQL
        /// (default 120; at least 10): longer than the slowest provider answers.
        public var deliveryClaimSeconds: Int?
        /// Where text messages go: the built-in recorder (default), Twilio or a JSON webhook.
        public var sms: SMSSection?
        /// Where push notifications go: the built-in recorder (default), FCM and/or APNs.
        public var push: PushSection?
        /// A PEM file of CA certificates trusted by the providers' HTTPS client besides the
        /// system's (a test CA, a TLS-inspecting proxy). Default: the system's only.
        public var providerCAFile: String?
        public init() {}
    }

    /// SMS provider. Secrets are read from the files named here, never written in this file.
    public struct SMSSection: Codable, Sendable {
        /// "recording" (default: nothing leaves the machine), "twilio" or "webhook".
        public var provider: String?
        /// Twilio: the account SID, the file holding its auth token, and `from` (a Twilio number
        /// in E.164) or `messagingServiceSid`.
        public var accountSid: String?
        public var authTokenFile: String?
        public var from: String?
        public var messagingServiceSid: String?
        /// Twilio's API root (default https://api.twilio.com), or the webhook's URL.
        public var url: String?
        /// Webhook: a file holding the bearer token sent as `Authorization` (optional).
        public var bearerTokenFile: String?
        public init() {}
    }

    /// Push providers: either or both. iOS devices go to APNs when it is set, else to FCM.
    public struct PushSection: Codable, Sendable {
        public var fcm: FCMSection?
        public var apns: APNsSection?
        public init() {}
    }

    public struct FCMSection: Codable, Sendable {
        /// The service account's JSON key file (Firebase console → Project settings → Service accounts).
        public var serviceAccountFile: String?
        /// FCM's API root (default https://fcm.googleapis.com).
        public var url: String?
        public init() {}
    }

    public struct APNsSection: Codable, Sendable {
        /// The `.p8` token-signing key file, its 10-character key id, the team id, and the app's bundle id.
        public var keyFile: String?
        public var keyId: String?
        public var teamId: String?
        public var topic: String?
        /// true: APNs' development server (apps built for development).
        public var sandbox: Bool?
        /// APNs' API root, overriding `sandbox` (a test server).
        public var url: String?
        public init() {}
    }

    public struct MediaSection: Codable, Sendable {
        /// This service's storage, over the deployment's `storage`.
        public var storage: StorageSection?
        /// The largest photo accepted (default 8 MiB).
        public var maxPhotoBytes: Int64?
        /// What one user's photos may take in all (default 256 MiB).
        public var quotaBytes: Int64?
        /// Uploads one user may start in an hour (default 120).
        public var uploadsPerHour: Int?

        public init() {}
    }

    /// The HTTP/JSON + WebSocket edge. Its listen address is `endpoints.edge`
    /// (`http://127.0.0.1:8080` by default; `https://…` needs the two TLS files).
    public struct EdgeSection: Codable, Sendable {
        /// PEM files: the certificate chain and its private key.
        public var tlsCertificateFile: String?
        public var tlsKeyFile: String?
        /// Browser origins allowed to call the API (CORS); none by default.
        public var corsOrigins: [String]?
        /// Largest JSON request body (default 1 MiB) and photo body (default 16 MiB).
        public var maxJSONBytes: Int?
        public var maxPhotoBytes: Int?
        /// WebSocket heartbeat period (default 15 s).
        public var heartbeatSeconds: Double?
        /// The web app's folder, served at `/` (default: the one built into frienso-edge; "": none).
        public var webRoot: String?

        public init() {}
    }

    public struct GatewaySection: Codable, Sendable {
        public var requestsPerSecond: Double?
        public var burst: Double?
        public var sessionCacheSeconds: Double?
        /// A file holding the gateway's CurveZMQ secret key (Z85); clients then need its public key.
        public var curveSecretKeyFile: String?

        public init(requestsPerSecond: Double? = nil, burst: Double? = nil, curveSecretKeyFile: String? = nil) {
            self.requestsPerSecond = requestsPerSecond
            self.burst = burst
            self.curveSecretKeyFile = curveSecretKeyFile
        }
    }

    public init() {}

    /// Writes the config as JSON that `load` reads back (unset fields left out).
    public func write(to path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(self).write(to: URL(fileURLWithPath: path))
    }

    /// Loads `path`. - Throws: a readable error naming the file and the problem.
    public static func load(_ path: String) throws -> FriensoConfig {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw ConfigError("cannot read config file \(path): \(error.localizedDescription)")
        }
        do {
            return try JSONDecoder().decode(FriensoConfig.self, from: data)
        } catch {
            throw ConfigError("config file \(path) is not valid: \(error)")
        }
    }
}

public struct ConfigError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// The embedded defaults: loopback TCP with fixed ports.
public enum Defaults {
    /// Where the launcher serves the deployment's metrics (`metricsListen`).
    public static let metricsListen = "127.0.0.1:9100"
    public static let endpoints: [String: String] = [
        "gateway": "tcp://127.0.0.1:7100",
        "accounts": "tcp://127.0.0.1:7101",
        "social": "tcp://127.0.0.1:7102",
        "geo": "tcp://127.0.0.1:7103",
        "alerts": "tcp://127.0.0.1:7104",
        "media": "tcp://127.0.0.1:7105",
        "edge": "http://127.0.0.1:8080",
    ]
    public static let eventEndpoints: [String: String] = [
        "accounts": "tcp://127.0.0.1:7111",
        "social": "tcp://127.0.0.1:7112",
        "geo": "tcp://127.0.0.1:7113",
        "alerts": "tcp://127.0.0.1:7114",
    ]
    public static let dataDir = "./run/data"
}
