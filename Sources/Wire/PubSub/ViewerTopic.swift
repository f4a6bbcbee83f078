/// The topic of an event addressed to one user: `viewer.<id>.`, in the `viewer` stream.
///
/// The dot after the id ends it. libzmq matches a subscription as a prefix of the topic, and it
/// does so at the publisher (ZMTP 3 sends SUB's subscriptions upstream), so a gateway that
/// subscribes `viewer.12.` for the one user connected to it is sent that user's events and no
/// others; without the end mark, `viewer.12` would also match `viewer.120`… `viewer.129` and every
/// longer id that starts with 12.
public enum ViewerTopic {
    /// What every viewer topic starts with (a subscription to all of them).
    public static let prefix = "viewer."
    /// Their stream (`Publisher.stream(of:)`).
    public static let stream = "viewer"

    /// The topic (and the exact subscription) for `user`'s events.
    public static func of(_ user: UInt64) -> String { "viewer.\(user)." }

    private static let prefixBytes = Array(prefix.utf8)
    private static let dot = UInt8(ascii: ".")

    /// The user a topic is for, read from its bytes; nil for any other topic.
    public static func user(in topic: some BidirectionalCollection<UInt8>) -> UInt64? {
        let prefix = prefixBytes
        // "viewer." + 1…20 digits + "."
        guard topic.count > prefix.count + 1, topic.count <= prefix.count + 21, topic.starts(with: prefix),
              topic.last == dot else { return nil }
        var id: UInt64 = 0
        for byte in topic.dropFirst(prefix.count).dropLast() {
            guard (48...57).contains(byte) else { return nil }
            let (shifted, o1) = id.multipliedReportingOverflow(by: 10)
            let (sum, o2) = shifted.addingReportingOverflow(UInt64(byte - 48))
            guard !o1, !o2 else { return nil }
            id = sum
        }
        return id
    }
}
