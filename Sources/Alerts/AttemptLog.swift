import FriensoProto
import Wire

/// The attempt log: every attempt to hand a delivery to its provider (see `DeliveryPass`), as
/// both engines record it.
enum AttemptLog {
    /// The error of an attempt that was SENDING when its pass ended without an answer (alerts
    /// stopped mid-pass): the message may have gone out.
    static let interrupted = "alerts stopped before the provider answered"

    /// A provider's answer as the log's columns hold it.
    struct Answer {
        var outcome: Int32
        var reference = ""
        var error = ""
        var retryAfterMs: Int64 = 0

        init(_ result: DeliveryResult) {
            outcome = result.outcome.rawValue
            switch result {
            case .delivered(let r): reference = r
            case .failed(let e, _), .deadAddress(let e): error = e
            case .retryAfter(let e, let after): (error, retryAfterMs) = (e, after.wholeMilliseconds)
            }
        }
    }
}
