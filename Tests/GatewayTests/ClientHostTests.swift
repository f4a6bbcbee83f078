@testable import Gateway
import Testing

/// The client's host the gateway rate-limits and forwards: the bare IP, from libzmq's
/// `Peer-Address` (already bare) and from the edge's "ip:port" (IPv6 in brackets) alike.
@Suite struct ClientHostTests {
    @Test func theHostIsTheBareIP_fromEitherFrontDoor() {
        // The edge's form: "ip:port", "[v6]:port".
        #expect(GatewayHandler.host(of: "127.0.0.1:54321") == "127.0.0.1")
        #expect(GatewayHandler.host(of: "[2001:db8::1]:443") == "2001:db8::1")
        #expect(GatewayHandler.host(of: "[::1]:80") == "::1")
        // libzmq's form: the bare address, kept whole (an IPv6 one too).
        #expect(GatewayHandler.host(of: "10.0.0.7") == "10.0.0.7")
        #expect(GatewayHandler.host(of: "2001:db8::1") == "2001:db8::1")
        #expect(GatewayHandler.host(of: "::1") == "::1")
        // Nothing known (inproc, ipc), odd shapes: never a crash, never an empty key from a non-empty one by accident.
        #expect(GatewayHandler.host(of: "") == "")
        #expect(GatewayHandler.host(of: "host:") == "host")
        #expect(GatewayHandler.host(of: "[::1") == "[::1")
        #expect(GatewayHandler.host(of: "hôte-é:80") == "hôte-é")
        let long = String(repeating: "a", count: 40)
        #expect(GatewayHandler.host(of: long + ":9") == long)
    }
}
