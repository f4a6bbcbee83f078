@testable import Gateway
import Testing

/// The client's host the gateway rate-limits and forwards: its peer address without the port.
@Suite struct ClientHostTests {
    @Test func theHostIsEverythingBeforeTheLastColon() {
        #expect(GatewayHandler.host(of: "127.0.0.1:54321") == "127.0.0.1")
        #expect(GatewayHandler.host(of: "tcp://10.0.0.7:5555") == "tcp://10.0.0.7")
        #expect(GatewayHandler.host(of: "[2001:db8::1]:443") == "[2001:db8::1]")
        #expect(GatewayHandler.host(of: "ipc-peer") == "ipc-peer")
        #expect(GatewayHandler.host(of: "") == "")
        #expect(GatewayHandler.host(of: ":1") == "")
        #expect(GatewayHandler.host(of: "hôte-é:80") == "hôte-é")
        // A long address (not a small string) and one whose last byte is the colon.
        let long = String(repeating: "a", count: 40)
        #expect(GatewayHandler.host(of: long + ":9") == long)
        #expect(GatewayHandler.host(of: "host:") == "host")
    }
}
