import Foundation
import Glibc
import ServiceKit
import Synchronization

/// Listens on every default deployment port that is free (7100–7105, 7111–7114, 8080, 9100) for as long as
/// the test process runs, and counts whatever connects: a test's process that reached a default
/// port fell back to an endpoint nobody gave it. The end-to-end harness fails the test then
/// (`ProcessHarness.shutdown`). A port a running deployment holds (`deploy/up` beside the tests)
/// is left to it: there the deployment's own keys refuse the stray connection instead.
public final class DefaultPortDecoy: Sendable {
    public static let ports: [UInt16] = (Array(Defaults.endpoints.values) + Array(Defaults.eventEndpoints.values) + [Defaults.metricsListen])
        .compactMap { $0.split(separator: ":").last.flatMap { UInt16($0) } }.sorted()
    public static let shared = DefaultPortDecoy()

    private let hits = Mutex<[UInt16: Int]>([:])
    /// The ports this decoy holds (the others were taken, by a running deployment perhaps).
    public let held: [UInt16]

    private init() {
        var listeners: [(Int32, UInt16)] = []
        for port in Self.ports {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { continue }
            var one: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = port.bigEndian
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
            }
            guard bound, listen(fd, 16) == 0 else { close(fd); continue }
            listeners.append((fd, port))
        }
        held = listeners.map(\.1)
        guard !listeners.isEmpty else { return }
        let open = listeners
        let thread = Thread { [self] in
            var items = open.map { pollfd(fd: $0.0, events: Int16(POLLIN), revents: 0) }
            while true {
                guard poll(&items, nfds_t(items.count), -1) > 0 else { continue }
                for (index, item) in items.enumerated() where item.revents & Int16(POLLIN) != 0 {
                    let connection = accept(item.fd, nil, nil)
                    if connection >= 0 { close(connection) }
                    hits.withLock { $0[open[index].1, default: 0] += 1 }
                }
            }
        }
        thread.name = "default-port-decoy"
        thread.start()
    }

    /// Connections accepted so far, on every held port.
    public var connections: Int { hits.withLock { $0.values.reduce(0, +) } }

    public func report() -> String {
        let counts = hits.withLock { $0 }
        return counts.isEmpty ? "none" : counts.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")
    }
}
