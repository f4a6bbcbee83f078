import Dispatch
import FriensoClient
import FriensoProto
import FriensoTesting
import Gateway
import Testing
import Wire

/// The gateway sends a read again (`frienso:read` in the contract) when the instance it went to
/// falls silent, as it does a keyed mutation: the client gets its answer from another instance.
@Suite("gateway: reads sent again", .timeLimit(.minutes(1)))
struct ResentReadsTests {
    /// Accounts runs as two instances, one of which stalls (its thread held, as a starved or
    /// stopped process's is) while reads are on their way to it. `accounts.Ping` is a read with
    /// no key and the client does not retry: each answer is the gateway's doing. Without the
    /// mark, the reads the stalled instance held came back UNAVAILABLE once its silence passed
    /// the gateway's dead window (checked: 3 of 6 with `Ping` not marked as a read).
    @Test func readsToAStalledInstance_areAnsweredByTheOther() async throws {
        let logs = CapturedLogs()
        let reactor = Reactor(name: "stalled-accounts")
        let stalled = ServiceHost(options: HostOptions(name: "accounts", endpoint: "tcp://127.0.0.1:*"), handler: MethodRouter(),
                                  logger: logs.logger("stalled"), reactor: reactor)
        try await withRunningServices([stalled], logger: logs.logger("group")) {
            let stalledEndpoint = try await stalled.boundEndpoint()
            try await withStack(configure: { config in
                config.services["accounts"] = EndpointList.join([stalledEndpoint, config.services["accounts"] ?? ""])
            }) { stack in
                let client = stack.client()
                // Both instances answer before the stall (the gateway's calls take turns).
                for _ in 0..<4 { _ = try await client.ping("accounts") }
                // Fault injection, not synchronisation: the instance's thread is held.
                let held = DispatchSemaphore(value: 0), holding = OneShot<Void>()
                let stall = Task(executorPreference: reactor) {
                    holding.fulfil(())
                    held.wait()
                }
                await holding.value
                let answered = await withTaskGroup(of: Bool.self) { group in
                    for _ in 0..<6 { group.addTask { (try? await client.ping("accounts", deadline: .seconds(20))) != nil } }
                    return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
                }
                held.signal()
                await stall.value
                #expect(answered == 6, "reads lost with the stalled instance: \(6 - answered)\n\(stack.logs.dump())")
                #expect(stack.logs.contains("peer silent"), "no read went to the stalled instance: the test saw nothing\n\(stack.logs.dump())")
            }
        }
        reactor.stop()
    }
}
