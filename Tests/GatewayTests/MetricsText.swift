import Prometheus

extension PrometheusCollectorRegistry {
    /// The registry's exposition text, as a member serves it.
    var exposition: String {
        var buffer: [UInt8] = []
        emit(into: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }
}

/// The lines of an exposition that start with `prefix` (a family's series), as a set.
func exposedLines(_ text: String, startingWith prefix: String) -> Set<String> {
    Set(text.split(separator: "\n").filter { $0.hasPrefix(prefix) }.map(String.init))
}
