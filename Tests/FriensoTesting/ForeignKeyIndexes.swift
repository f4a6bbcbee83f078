public import GRDB
public import Storage

/// The foreign keys no index serves. Deleting (or re-keying) a parent row makes the database
/// search the child table for rows that still name it: SQLite and PostgreSQL both walk that
/// table whole unless an index leads with the child's columns. Media's `media.sha256` had none
/// on SQLite, so every photo whose blob went with it walked `media` (issue 16, item 156).
public enum ForeignKeyIndexes {
    /// A service's store opened on a fresh storage of `engine`, its migrations run: how many
    /// foreign keys its tables have, and those no index serves (`missing`).
    /// - Parameters:
    ///   - sqlite: opens the store in a data folder; gives its database.
    ///   - postgres: opens the store on a database (its schema is the storage's).
    public static func audit(_ engine: Engine, service: String, sqlite: @escaping (String) throws -> ServiceDatabase,
                             postgres: @escaping (PostgresServiceDatabase) async throws -> Void) async throws -> (count: Int, missing: [String]) {
        try await TestStorage.withOpen(engine, given: nil, service: service) { storage, opened in
            switch opened {
            case .sqlite(let directory):
                let database = try sqlite(directory)
                return try await database.read { db in (try count(in: db), try missing(in: db)) }
            case .postgres(let database):
                try await postgres(database)
                return (try await count(in: storage), try await missing(in: storage))
            }
        }
    }

    /// SQLite: each foreign key of `db`'s tables whose columns lead no full index and are not the
    /// table's rowid, as `table(columns) → parent`. A partial index does not count.
    public static func missing(in db: Database) throws -> [String] {
        var missing: [String] = []
        let tables = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        for table in tables {
            let keys = try Row.fetchAll(db, sql: "SELECT id, \"from\" AS child, \"table\" AS parent FROM pragma_foreign_key_list(?) ORDER BY id, seq",
                                        arguments: [table])
            guard !keys.isEmpty else { continue }
            var leading: [[String]] = []
            for index in try Row.fetchAll(db, sql: "SELECT name FROM pragma_index_list(?) WHERE partial = 0", arguments: [table]) {
                leading.append(try String.fetchAll(db, sql: "SELECT name FROM pragma_index_info(?) ORDER BY seqno", arguments: [index["name"] as String]))
            }
            // An INTEGER PRIMARY KEY is the rowid, the table's own order.
            let key = try Row.fetchAll(db, sql: "SELECT name, type FROM pragma_table_info(?) WHERE pk > 0", arguments: [table])
            if key.count == 1, (key[0]["type"] as String).uppercased() == "INTEGER" { leading.append([key[0]["name"]]) }
            for (_, rows) in Dictionary(grouping: keys, by: { $0["id"] as Int }).sorted(by: { $0.key < $1.key }) {
                let columns = rows.map { $0["child"] as String }
                let served = leading.contains { $0.count >= columns.count && Set($0.prefix(columns.count)) == Set(columns) }
                if !served { missing.append("\(table)(\(columns.joined(separator: ", "))) → \(rows[0]["parent"] as String)") }
            }
        }
        return missing
    }

    /// PostgreSQL: the same for the tables of `storage`'s schema. A partial index counts only
    /// when its predicate is that its first column is not null, which the search for a key implies.
    public static func missing(in storage: TestStorage) async throws -> [String] {
        let output = try await storage.psql("""
            SELECT c.conrelid::regclass::text || '(' || (
                       SELECT string_agg(a.attname, ', ' ORDER BY k.n) FROM unnest(c.conkey) WITH ORDINALITY k(attnum, n)
                       JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum)
                   || ') → ' || c.confrelid::regclass::text
            FROM pg_constraint c
            WHERE c.contype = 'f' AND c.connamespace = '\(storage.schema)'::regnamespace
              AND NOT EXISTS (
                  SELECT 1 FROM pg_index i
                  WHERE i.indrelid = c.conrelid
                    AND (string_to_array(i.indkey::text, ' ')::int2[])[1:cardinality(c.conkey)] @> c.conkey
                    AND (string_to_array(i.indkey::text, ' ')::int2[])[1:cardinality(c.conkey)] <@ c.conkey
                    AND (i.indpred IS NULL OR pg_get_expr(i.indpred, i.indrelid) = '(' || (
                        SELECT quote_ident(attname) FROM pg_attribute WHERE attrelid = c.conrelid AND attnum = c.conkey[1]) || ' IS NOT NULL)'))
            ORDER BY 1
            """)
        return output.split(separator: "\n").map(String.init)
    }

    /// How many foreign keys `storage`'s schema has (PostgreSQL): a check that `missing` looked at some.
    public static func count(in storage: TestStorage) async throws -> Int {
        Int(try await storage.psql("SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND connamespace = '\(storage.schema)'::regnamespace")) ?? -1
    }

    /// How many foreign keys `db`'s tables have (SQLite).
    public static func count(in db: Database) throws -> Int {
        try Int.fetchOne(db, sql: """
            SELECT count(DISTINCT t.name || '.' || f.id) FROM sqlite_master t, pragma_foreign_key_list(t.name) f WHERE t.type = 'table'
            """) ?? 0
    }
}
