import FriensoProto

/// One input: the first byte picks a target (the envelope, or one request message of the
/// contracts), the rest is decoded as it. Decoding may fail; it must not crash, and what decodes
/// must re-encode to a fixed point.
/// - Returns: the name of the message whose property failed, or nil.
func fuzzOne(_ data: UnsafeRawBufferPointer) -> String? {
    guard let first = data.first else { return nil }
    let type = FuzzTargets.all[Int(first) % FuzzTargets.all.count]
    return FuzzTargets.stable(type, Array(data.dropFirst())) ? nil : type.protoName
}

enum FuzzTargets {
    /// The envelope, then every request message in `proto/`.
    static let all: [any ProtoMessage.Type] =
        [CommonV1.Envelope.self] + ProtoIndex.messageTypes.filter { $0.protoName.hasSuffix("Request") }

    static func stable<M: ProtoMessage>(_ type: M.Type, _ bytes: [UInt8]) -> Bool {
        guard let value = try? M(serializedBytes: bytes) else { return true }
        let once = value.serializedBytes()
        guard let again = try? M(serializedBytes: once) else { return false }
        _ = value.largestUInt64
        return again.serializedBytes() == once
    }
}

#if FUZZING
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// libFuzzer's callback (its runtime refers to it by name).
@_cdecl("LLVMFuzzerTestOneInput")
public func LLVMFuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    // libFuzzer learns of a finding only by a crash: a broken property must trap here.
    if let broken = fuzzOne(UnsafeRawBufferPointer(start: data, count: size)) {
        preconditionFailure("\(broken): re-encoding is not a fixed point")
    }
    return 0
}

/// The executable's entry (SwiftPM links `main` to `<module>_main`): hands over to libFuzzer's
/// driver, which the `-sanitize=fuzzer` build links in.
@_cdecl("frienso_fuzz_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments, LLVMFuzzerTestOneInput)
}
#else
import Foundation

/// Without the fuzzer: replays files (a corpus, or a crash libFuzzer saved) through the same check.
@main
struct Replay {
    static func main() {
        let paths = CommandLine.arguments.dropFirst()
        guard !paths.isEmpty else {
            print("usage: frienso-fuzz FILE...   (replays inputs; see deploy/fuzz for the libFuzzer build)")
            return
        }
        var failed = false
        for path in paths {
            guard let data = FileManager.default.contents(atPath: path) else { print("cannot read \(path)"); failed = true; continue }
            if let broken = data.withUnsafeBytes({ fuzzOne($0) }) {
                print("FAIL \(path): \(broken) does not re-encode to a fixed point")
                failed = true
            } else {
                print("ok \(path)")
            }
        }
        if failed { exit(1) }
    }
}
#endif
