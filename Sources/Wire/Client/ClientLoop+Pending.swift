import FriensoProto
import Synchronization

/// How an async call waits for its reply (release builds trust the loop, which removes a call
/// from `pending` before finishing it).
typealias ReplyContinuation = ResumedOnce<Envelope>

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

        /// The request; `flushUnsent` sets its deadline in place before each send, and sends it
        /// from here through an `inout` access (no copy). Unchecked for exclusivity as the loop's
        /// own state is (`ClientLoop.pending`): touched by one thread at a time (the caller's until
        /// the command queue's hand-over, then the reactor's), and no access to it encloses a call
        /// that could reach it again; checked, the `inout` send made every access to it pay for
        /// a dynamic check (about 80 instructions each, three a request: item 104).
        @exclusivity(unchecked) var envelope: Envelope
        let deadline: Moment
        let retryable: Bool
        /// Who is told the outcome; nil only for an async caller's call between its `init` and
        /// `resumes(_:)`, both before the call is posted to its loop.
        private var completion: Completion?
        // Touched on the reactor thread only (after the hand-over through the command queue).
        var attempts = 0
        var sent = false
        /// Its last send was in a batch frame (`flushInBatches`).
        var sentInBatch = false

        /// - Parameter completion: nil for an async caller, whose continuation does not exist
        ///   yet: `resumes(_:)` gives it, in the continuation's closure, before the call is
        ///   posted. The envelope moves in outside that closure: a value the closure captured
        ///   would be copied into the call.
        init(envelope: consuming Envelope, deadline: Moment, retryable: Bool, completion: Completion? = nil) {
            self.envelope = envelope
            self.deadline = deadline
            self.retryable = retryable
            self.completion = completion
        }

        /// Names the async caller to resume (before the call is posted to its loop).
        func resumes(_ continuation: ReplyContinuation) {
            completion = .resume(continuation)
        }

        /// Whether the reply goes to a relay (`Completion.relay`).
        var relays: Bool {
            if case .relay? = completion { true } else { false }
        }

        func finish(_ reply: consuming Envelope) {
            switch completion {
            case .resume(let continuation)?: continuation.resume(returning: reply)
            case .call(let body)?: body(reply)
            case .relay(let body)?: body(RelayedReply(reply))
            case nil: preconditionFailure("a call finished before its caller awaited it")
            }
        }

        /// Ends a relaying call with the reply's fields read in place (valid during this call).
        func finish(relaying fields: ReplyFields) {
            guard case .relay(let body)? = completion else { preconditionFailure("finish(relaying:) on a call that does not relay") }
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
