import CSQLiteSettings

/// SQLite's process-wide settings (`CSQLiteSettings`, made by a C constructor when the process
/// loads): the multi-thread threading mode and no memory statistics. Every SQLite connection the
/// project opens is used by one thread at a time: GRDB's pools and queues reach theirs through a
/// serialized queue, `InPlaceReaders` hands each of its connections to one read at a time, and
/// the checkpointer's connection is its own queue's. Under SQLite's default (serialized) mode
/// every API call on a connection also took that connection's mutex, and every allocation a
/// global one for its statistics: about 2,000 instructions a location update in geo
/// (`docs/benchmarks.md`, issue 16, item 136).
public enum SQLiteSettings: Equatable, Sendable {
    /// Multi-thread mode, memory statistics off.
    case multiThread
    /// SQLite's defaults kept: `FRIENSO_SQLITE_MUTEXES=serialized` (A/B runs).
    case keptByEnvironment
    /// SQLite's defaults kept: it refused the settings (it had initialised before they were made).
    case refused

    /// What the process runs with.
    public static var current: SQLiteSettings {
        switch frienso_sqlite_settings_outcome() {
        case 0: .multiThread
        case 1: .keptByEnvironment
        default: .refused
        }
    }
}
