@testable import Accounts
import FriensoTesting
import Testing

/// Deleting an account (its sessions, links and reset codes go with it, `ON DELETE CASCADE`)
/// finds each child row by an index, on both engines: no table walked whole (issue 16, item 156).
@Suite("accounts: foreign keys", .timeLimit(.minutes(1)))
struct ForeignKeyIndexTests {
    @Test(arguments: Engine.allCases) func everyForeignKey_leadsAnIndex(engine: Engine) async throws {
        let (count, missing) = try await ForeignKeyIndexes.audit(engine, service: "accounts",
                                                                 sqlite: { try SQLiteAccountsStore(path: "\($0)/accounts.sqlite").database },
                                                                 postgres: { _ = try await PostgresAccountsStore.open($0) })
        #expect(count > 0, "no foreign key seen")
        #expect(missing.isEmpty, "walked whole when their parent row goes: \(missing)")
    }
}
