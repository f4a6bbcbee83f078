public import Wire
import Synchronization

/// The durable reply store of a process that dies before any reply's save lands (a crash right
/// after it answered): reads go to the real store, saves are counted and lost.
public final class LosingSaves: ReplyStore, Sendable {
    let base: any ReplyStore
    private let count = Atomic<Int>(0)
    /// Saves handed to it (all lost).
    public var saves: Int { count.load(ordering: .relaxed) }

    public init(_ base: any ReplyStore) { self.base = base }

    public func load(_ key: String) async -> StoredReply? { await base.load(key) }
    public func save(_ key: String, _ stored: StoredReply) async { count.add(1, ordering: .relaxed) }
    public func save(_ key: String, _ stored: StoredReply, then done: @escaping @Sendable () -> Void) {
        count.add(1, ordering: .relaxed)
        done()
    }
}
