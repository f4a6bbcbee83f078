import SocialReplica
import Synchronization

/// Alerts' copy of every core circle: the accepted members and invited numbers, in circle order,
/// as social answers them (`CircleSnapshot` pages when the copy loads, `CircleOf` for a circle
/// read since), so that a helpNow is recorded without waiting for social.
///
/// An entry is used only while the graph replica has applied no change to that circle since the
/// entry was read. The replica counts circle changes (`GraphState.circleChanges`, from social's
/// `graph` stream, whose events name the owner of every change to an accepted member or an
/// invited number, never the number); an entry keeps the count read before social was asked, so
/// a change social may not have answered with marks it out of date, and the raise asks social as
/// it would without a copy. A change the replica has not applied yet (the stream's delay) is one
/// made at the same moment as the raise, as it is for a raise whose question to social crosses it.
/// A replica that loads a snapshot afresh starts a new count (`generation`): every entry is out
/// of date until the copy loads again.
final class CircleCopy: Sendable {
    struct Entry: Sendable, Equatable {
        var contacts: [CircleContact]
        var generation: UInt64
        var readAt: UInt64
    }
    private struct State {
        var entries: [UInt64: Entry] = [:]
        /// The snapshot the copy loaded: an owner it does not list had nobody in their circle then.
        var loaded: (generation: UInt64, readAt: UInt64)?
    }
    private let state = Mutex(State())
    /// The replica's count (nil: no replica, or not loaded yet: the copy is not used).
    let clock: @Sendable (UInt64) -> CircleClock?

    init(clock: @escaping @Sendable (UInt64) -> CircleClock?) {
        self.clock = clock
    }

    /// Whether an entry read at `readAt` in `generation` still stands at `now`.
    static func isCurrent(generation: UInt64, readAt: UInt64, _ now: CircleClock) -> Bool {
        generation == now.generation && now.ownerChangedAt <= readAt
    }

    /// `owner`'s circle when the copy holds it as it is now; nil: ask social.
    func circle(of owner: UInt64) -> [CircleContact]? {
        guard let now = clock(owner) else { return nil }
        return state.withLock { s in
            if let entry = s.entries[owner] {
                return Self.isCurrent(generation: entry.generation, readAt: entry.readAt, now) ? entry.contacts : nil
            }
            guard let loaded = s.loaded, Self.isCurrent(generation: loaded.generation, readAt: loaded.readAt, now) else { return nil }
            return []
        }
    }

    /// Keeps social's answer for `owner`, asked after the replica stood at `before`.
    func keep(_ contacts: [CircleContact], of owner: UInt64, readAfter before: CircleClock) {
        state.withLock { $0.entries[owner] = Entry(contacts: contacts, generation: before.generation, readAt: before.changes) }
    }

    /// Replaces the whole copy with a snapshot read after the replica stood at `before`.
    func replaceAll(_ circles: [UInt64: [CircleContact]], readAfter before: CircleClock) {
        let entries = circles.mapValues { Entry(contacts: $0, generation: before.generation, readAt: before.changes) }
        state.withLock { $0 = State(entries: entries, loaded: (before.generation, before.changes)) }
    }

    /// The replica generation of the loaded snapshot (nil: none loaded yet).
    var loadedGeneration: UInt64? { state.withLock { $0.loaded?.generation } }
    var count: Int { state.withLock { $0.entries.count } }

    /// Forgets `owner`'s circle (an erased account).
    func forget(_ owner: UInt64) {
        state.withLock { _ = $0.entries.removeValue(forKey: owner) }
    }
}
