public import FriensoProto

/// A list bound as one statement argument and read in SQL through `json_each(?)`: any number of
/// values, one prepared statement (SQLite has no array parameter).
public enum JSONList {
    /// Ids as a JSON array of integers (written out in full: a JSON number would be a `Double`).
    public static func of<T: BinaryInteger>(_ values: [T]) -> String {
        "[" + values.map { String($0) }.joined(separator: ",") + "]"
    }

    /// Strings as a JSON array, quoted by the project's JSON writer (`JSONValue`).
    public static func of(_ values: [String]) -> String {
        JSONValue.array(values.map { .string($0) }).rendered()
    }
}
