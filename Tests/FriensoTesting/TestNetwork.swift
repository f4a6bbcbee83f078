import Foundation
import Glibc
import ServiceKit

/// Hosts on one machine, for real: each a Linux network namespace with its own loopback and one
/// link (a veth pair) to a bridge in the test's namespace, on a /24 of 10.213.x.0 of its own. The
/// test process reaches every host through the bridge (`10.213.x.254`); a host's link can be cut
/// and restored (`ip link set … down/up`) like a cable. Needs root and iproute2; everything it
/// made is removed by `remove()` (and a host's processes must be stopped first).
public final class TestNetwork: Sendable {
    public let hosts: [String]
    private let id: String
    private let subnet: Int

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// - Parameter hosts: short names (the namespaces are `fr<id>-<name>`).
    public init(hosts: [String]) throws {
        guard geteuid() == 0 else { throw Failure(description: "network namespaces need root (the CI runs as root)") }
        self.hosts = hosts
        id = String(UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(6)).lowercased()
        // A /24 nobody here uses: a network a killed run left behind (its bridge keeps its
        // address) on the same /24 would take this one's packets.
        let used = Self.subnetsInUse()
        guard let free = (1...250).filter({ !used.contains($0) }).randomElement() else {
            throw Failure(description: "every 10.213.x.0/24 is in use on this machine")
        }
        subnet = free
        do {
            try Self.ip(["link", "add", bridge, "type", "bridge"])
            try Self.ip(["addr", "add", "10.213.\(subnet).254/24", "dev", bridge])
            try Self.ip(["link", "set", bridge, "up"])
            for (index, host) in hosts.enumerated() {
                let ns = namespace(host)
                try Self.ip(["netns", "add", ns])
                try Self.ip(["link", "add", outside(index), "type", "veth", "peer", "name", inside(index)])
                try Self.ip(["link", "set", inside(index), "netns", ns])
                try Self.ip(["link", "set", outside(index), "master", bridge])
                try Self.ip(["link", "set", outside(index), "up"])
                try Self.ip(["-n", ns, "addr", "add", "\(address(host))/24", "dev", inside(index)])
                try Self.ip(["-n", ns, "link", "set", inside(index), "up"])
                try Self.ip(["-n", ns, "link", "set", "lo", "up"])
            }
        } catch {
            remove()
            throw error
        }
    }

    private var bridge: String { "frb\(id)" }
    private func outside(_ index: Int) -> String { "fro\(id)\(index)" }
    private func inside(_ index: Int) -> String { "fri\(id)\(index)" }

    /// The namespace of `host`.
    public func namespace(_ host: String) -> String { "fr\(id)-\(host)" }

    /// The address of `host` on the test's network.
    public func address(_ host: String) -> String {
        "10.213.\(subnet).\((hosts.firstIndex(of: host) ?? 0) + 1)"
    }

    /// The command prefix that runs a program on `host`.
    public func exec(_ host: String) -> [String] { ["/usr/sbin/ip", "netns", "exec", namespace(host)] }

    /// Cuts `host`'s link: nothing reaches it or leaves it until `restore`.
    public func cut(_ host: String) throws {
        try Self.ip(["link", "set", outside(hosts.firstIndex(of: host) ?? 0), "down"])
    }

    public func restore(_ host: String) throws {
        try Self.ip(["link", "set", outside(hosts.firstIndex(of: host) ?? 0), "up"])
    }

    /// Deletes the namespaces, links and bridge (what exists of them).
    public func remove() {
        for (index, host) in hosts.enumerated() {
            _ = Spawn.run(["/usr/sbin/ip", "link", "del", outside(index)])
            _ = Spawn.run(["/usr/sbin/ip", "netns", "del", namespace(host)])
        }
        _ = Spawn.run(["/usr/sbin/ip", "link", "del", bridge])
    }

    /// The x of every 10.213.x.y address on this machine's interfaces.
    public static func subnetsInUse() -> Set<Int> {
        let listed = Spawn.run(["/usr/sbin/ip", "-o", "-4", "addr", "show"]).output
        return Set(listed.split(separator: "\n").compactMap { line -> Int? in
            guard let range = line.range(of: " 10.213.") else { return nil }
            return Int(line[range.upperBound...].prefix { $0.isNumber })
        })
    }

    private static func ip(_ arguments: [String]) throws {
        let result = Spawn.run(["/usr/sbin/ip"] + arguments)
        guard result.status == 0 else { throw Failure(description: "ip \(arguments.joined(separator: " ")): \(result.output)") }
    }
}
