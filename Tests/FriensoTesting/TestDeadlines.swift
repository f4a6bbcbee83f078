public import Wire

/// How long a test's call may take before it fails for want of an answer.
///
/// A test checks what a service answers, not how fast: the in-process suites run some 480 tests
/// at once on two cores, and a request whose handler runs on Swift's cooperative pool can wait
/// there for seconds behind the other tests' work (CI, 2026-12-03: three calls got
/// DEADLINE_EXCEEDED from their own host at the production default of 5 s while the suite
/// started). A test about deadlines names its own, shorter one; every other call gets this,
/// which only a hang reaches.
public enum TestDeadline {
    /// Six times the production default, and under the one-minute time limit of most suites, so a
    /// call that never returns fails with its own error and the test's logs.
    public static let patient: Duration = .seconds(30)
}

extension ClientOptions {
    /// The production client (heartbeats, liveness, retries, security as given) with
    /// `TestDeadline.patient` for calls that name no deadline.
    public static var patient: ClientOptions {
        var options = ClientOptions()
        options.defaultDeadline = TestDeadline.patient
        return options
    }
}
