/// `scheme://host:port` (tcp, http, https; an IPv6 host in brackets) as host and port: how the
/// edge reads its listen address and the launcher the address it probes.
public enum EndpointAddress {
    /// - Returns: nil unless the text ends in `host:port` with a port from 0 to 65,535.
    public static func hostAndPort(_ endpoint: String) -> (host: String, port: Int)? {
        var rest = Substring(endpoint)
        if let scheme = rest.range(of: "://") { rest = rest[scheme.upperBound...] }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard let colon = rest.lastIndex(of: ":"), let port = Int(rest[rest.index(after: colon)...]), (0...65_535).contains(port) else {
            return nil
        }
        var host = String(rest[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return host.isEmpty ? nil : (host, port)
    }
}
