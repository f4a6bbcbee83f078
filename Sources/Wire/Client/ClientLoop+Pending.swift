import FriensoProto
import Synchronization

#if DEBUG
/// How an async call waits for its reply. Debug builds (the tests) check that every call is
/// resumed exactly once; release builds trust the loop, which removes a call from `pending`
/// before finishing it: a checked continuation allocates and frees a canary object per call.
typealias ReplyContinuation = CheckedContinuation<Envelope, Never>
#else
typealias ReplyContinuation = UnsafeContinuation<Envelope, Never>
#endif

/// Suspends the caller until the continuation `body` is given is resumed (see `ReplyContinuation`).
@inline(__always)
nonisolated(nonsending) func withReplyContinuation(_ body: (ReplyContinuation) -> Void) async -> Envelope {
    #if DEBUG
    await withCheckedContinuation(body)
    #else
    await withUnsafeContinuation(body)
    #endif
}

/// What a `ClientLoop` keeps per call and shares with its `WireClient`.
extension ClientLoop {
    /// A call in flight. A class: the loop updates it in place, never copying the envelope.
    final class Pending: @unchecked Sendable {
        /// Who is told the outcome, exactly once.
        enum Completion {
            /// An async caller (`WireClient.send`), resumed from the reactor thread.
            case resume(ReplyContinuation)
            /// A caller on this reactor (`WireClient.sendOnReactor`), called on its thread.
            case call((Envelope) -> Void)
            /// A caller on this reactor that passes the reply on (`WireClient.relayOnReactor`):
            /// handed the reply where it lies when the loop can read it in place.
            case relay((RelayedReply) -> Void)
        }

        /// The request; `flushUnsent` sets its deadline in place before each send.
        var envelope: Envelope
        let deadline: ContinuousClock.Instant
        let retryable: Bool
        private let completion: Completion
        // Touched on the reactor thread only (after the hand-over through the command queue).
        var attempts = 0
        var sent = false

        init(envelope: Envelope, deadline: ContinuousClock.Instant, retryable: Bool, completion: Completion) {
            self.envelope = envelope
            self.deadline = deadline
            self.retryable = retryable
            self.completion = completion
        }

        /// Whether the reply goes to a relay (`Completion.relay`).
        var relays: Bool {
            if case .relay = completion { true } else { false }
        }

        func finish(_ reply: consuming Envelope) {
            switch completion {
            case .resume(let continuation): continuation.resume(returning: reply)
            case .call(let body): body(reply)
            case .relay(let body): body(RelayedReply(reply))
            }
        }

        /// Ends a relaying call with the reply's fields read in place (valid during this call).
        func finish(relaying fields: ReplyFields) {
            guard case .relay(let body) = completion else { preconditionFailure("finish(relaying:) on a call that does not relay") }
            body(RelayedReply(fields))
        }

        /// Ends the call with `error`, as the client (not the peer) answers it.
        func fail(_ error: RPCError) {
            finish(envelope.reply(error: error))
        }
    }

    /// The loop, for code on its reactor's thread; set and read on that thread only.
    final class Slot: @unchecked Sendable {
        var loop: ClientLoop?
    }

    /// Whether the peer answers, as the loop last knew it, for a client choosing among
    /// several instances from any thread.
    final class Health: Sendable {
        let answering = Atomic<Bool>(true)
    }
}
