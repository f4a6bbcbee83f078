import Foundation

/// A JSON document that does not map onto the message it was read as.
public struct JSONMappingError: Error, Hashable, CustomStringConvertible {
    /// Where, as a field path (`fix.latitude`, `friends[2].userId`); empty for the whole document.
    public var path: String
    public var reason: String

    public init(path: String, _ reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String { path.isEmpty ? reason : "\(path): \(reason)" }

    /// The same error one level up: inside `field` of the enclosing message.
    public func inside(_ field: String) -> JSONMappingError {
        JSONMappingError(path: path.isEmpty ? field : (path.hasPrefix("[") ? field + path : "\(field).\(path)"), reason)
    }
}

/// Reading proto3's canonical JSON mapping, as `init(json:)` (generated per message) does:
/// - every field by its lowerCamel JSON name or its proto name; a field given twice, or a name
///   the message does not have, is an error (a client's typo must not be silently dropped);
/// - `null` is the field's default;
/// - 64-bit integers as decimal strings (canonical) or as JSON numbers that are exact integers
///   (below 2^53 in magnitude: past it a JSON number read as a double may not be the one written);
/// - 32-bit integers as numbers or decimal strings; floats as numbers or "NaN", "Infinity",
///   "-Infinity";
/// - bytes as base64, standard or URL-safe, padded or not;
/// - enums by name (`KIND_HELP_NOW`) or number.
public enum ProtoJSON {
    public static func object(_ json: JSONValue, _ message: String) throws(JSONMappingError) -> [(String, JSONValue)] {
        switch json {
        case .object(let pairs):
            var seen = Set<String>()
            for (key, _) in pairs where !seen.insert(key).inserted {
                throw JSONMappingError(path: key, "given twice")
            }
            return pairs
        case .null: return []
        default: throw JSONMappingError(path: "", "expected an object (\(message))")
        }
    }

    public static func unknown(_ key: String, _ message: String) -> JSONMappingError {
        JSONMappingError(path: key, "no such field")
    }

    /// Reads a field: `read` on the value, errors placed inside `field`.
    @inline(__always)
    public static func field<T>(_ field: String, _ read: () throws(JSONMappingError) -> T) throws(JSONMappingError) -> T {
        do {
            return try read()
        } catch {
            throw error.inside(field)
        }
    }

    public static func repeated<T>(_ json: JSONValue, _ each: (JSONValue) throws(JSONMappingError) -> T) throws(JSONMappingError) -> [T] {
        switch json {
        case .null: return []
        case .array(let items):
            var out: [T] = []
            out.reserveCapacity(items.count)
            for (i, item) in items.enumerated() {
                do {
                    out.append(try each(item))
                } catch {
                    throw error.inside("[\(i)]")
                }
            }
            return out
        default: throw JSONMappingError(path: "", "expected an array")
        }
    }

    public static func bool(_ json: JSONValue) throws(JSONMappingError) -> Bool {
        switch json {
        case .null: return false
        case .bool(let b): return b
        default: throw JSONMappingError(path: "", "expected true or false")
        }
    }

    public static func string(_ json: JSONValue) throws(JSONMappingError) -> String {
        switch json {
        case .null: return ""
        case .string(let s): return s
        default: throw JSONMappingError(path: "", "expected a string")
        }
    }

    public static func bytes(_ json: JSONValue) throws(JSONMappingError) -> [UInt8] {
        switch json {
        case .null: return []
        case .string(let s):
            var text = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while text.count % 4 != 0 { text += "=" }
            guard let data = Data(base64Encoded: text) else { throw JSONMappingError(path: "", "expected base64") }
            return [UInt8](data)
        default: throw JSONMappingError(path: "", "expected a base64 string")
        }
    }

    /// An integral value within `range`, from a number or a decimal string.
    static func integer<T: FixedWidthInteger>(_ json: JSONValue, _ type: T.Type) throws(JSONMappingError) -> T {
        switch json {
        case .null: return 0
        case .number(let n):
            // Below 2^53 every integer literal is read exactly; at or past it the Double may
            // already be another number than the one written.
            guard n == n.rounded(), abs(n) < 9_007_199_254_740_992 else {
                throw JSONMappingError(path: "", "expected an integer (64-bit values past 2^53 as a decimal string)")
            }
            guard let value = T(exactly: n) else { throw JSONMappingError(path: "", "out of range for \(T.self)") }
            return value
        case .string(let s):
            guard let value = T(s, radix: 10) else { throw JSONMappingError(path: "", "expected a decimal \(T.self)") }
            return value
        default: throw JSONMappingError(path: "", "expected an integer")
        }
    }

    public static func int32(_ json: JSONValue) throws(JSONMappingError) -> Int32 { try integer(json, Int32.self) }
    public static func uint32(_ json: JSONValue) throws(JSONMappingError) -> UInt32 { try integer(json, UInt32.self) }
    public static func int64(_ json: JSONValue) throws(JSONMappingError) -> Int64 { try integer(json, Int64.self) }
    public static func uint64(_ json: JSONValue) throws(JSONMappingError) -> UInt64 { try integer(json, UInt64.self) }

    public static func double(_ json: JSONValue) throws(JSONMappingError) -> Double {
        switch json {
        case .null: return 0
        case .number(let n): return n
        case .string("NaN"): return .nan
        case .string("Infinity"): return .infinity
        case .string("-Infinity"): return -.infinity
        case .string(let s):
            guard let n = Double(s), n.isFinite else { throw JSONMappingError(path: "", "expected a number") }
            return n
        default: throw JSONMappingError(path: "", "expected a number")
        }
    }

    public static func float(_ json: JSONValue) throws(JSONMappingError) -> Float {
        let value = try double(json)
        guard !value.isFinite || abs(value) <= Double(Float.greatestFiniteMagnitude) else {
            throw JSONMappingError(path: "", "out of range for a float")
        }
        return Float(value)
    }

    public static func enumeration<E: ProtoEnum>(_ json: JSONValue, _ type: E.Type) throws(JSONMappingError) -> E {
        switch json {
        case .null: return E(rawValue: 0)
        case .string(let name):
            // A number this build does not know is written as its decimal (`protoName`).
            if let number = Int32(name) { return E(rawValue: number) }
            guard let value = E.allKnownCases.first(where: { $0.protoName == name }) else {
                throw JSONMappingError(path: "", "unknown value \"\(name)\"; one of \(E.allKnownCases.map(\.protoName).joined(separator: ", "))")
            }
            return value
        case .number:
            return E(rawValue: try integer(json, Int32.self))
        default: throw JSONMappingError(path: "", "expected an enum name")
        }
    }

    public static func message<M: ProtoMessage>(_ json: JSONValue, _ type: M.Type) throws(JSONMappingError) -> M? {
        if case .null = json { return nil }
        return try M(json: json)
    }
}

/// A method's JSON mapping: its request from JSON to protobuf bytes and its response back, for
/// front doors that speak JSON (the HTTP edge). Generated per rpc (`ProtoIndex.jsonCodecs`).
public struct MethodJSONCodec: Sendable {
    public let method: AnyRPCMethod
    public let requestName: String
    public let responseName: String
    /// JSON (already parsed) to the request's protobuf encoding.
    public let request: @Sendable (JSONValue) throws(JSONMappingError) -> [UInt8]
    /// The response's protobuf encoding to its JSON text (`jsonValue`'s, in UTF-8, on one
    /// line); nil when the bytes do not decode.
    public let response: @Sendable ([UInt8]) -> [UInt8]?
}

extension RPCMethod {
    public var jsonCodec: MethodJSONCodec {
        MethodJSONCodec(
            method: erased, requestName: Request.protoName, responseName: Response.protoName,
            request: { (json: JSONValue) throws(JSONMappingError) -> [UInt8] in try Request(json: json).serializedBytes() },
            response: { bytes in
                guard let response = try? Response(serializedBytes: bytes) else { return nil }
                var text: [UInt8] = []
                text.reserveCapacity(256 + 2 * bytes.count)
                response.writeJSON(into: &text)
                return text
            })
    }
}
