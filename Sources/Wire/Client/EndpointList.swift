import Foundation

/// Several instances of one member at one configured endpoint: `tcp://10.0.0.2:7101,tcp://10.0.0.3:7101`.
/// A client spreads its calls over them (`WireClient`), a subscriber takes events from all of
/// them (`Subscriber`). ZeroMQ endpoints never contain a comma.
public enum EndpointList {
    /// The endpoints of `list`, in order, blanks dropped.
    public static func split(_ list: String) -> [String] {
        list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    public static func join(_ endpoints: [String]) -> String {
        endpoints.joined(separator: ",")
    }
}
