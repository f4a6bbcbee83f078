public import Foundation
import Glibc

/// Pipe I/O that survives signals. Foundation's `readDataToEndOfFile()` and `write(_:)` trap on
/// EINTR, and the tests' processes send SIGCHLD often (every child that exits, `kill -9` tests).
public enum POSIXIO {
    /// Reads until end of file, retrying interrupted reads.
    public static func readAll(_ handle: FileHandle) -> Data {
        var out = Data()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = read(handle.fileDescriptor, &buffer, buffer.count)
            if n > 0 {
                out.append(contentsOf: buffer[0..<n])
            } else if n == 0 || errno != EINTR {
                return out
            }
        }
    }

    /// A child that exits without reading all its input closes the pipe: the write then fails
    /// with EPIPE instead of raising SIGPIPE, which would end the whole test runner. (Children
    /// start with every signal at its default: `Spawn`.)
    private static let pipesFailQuietly: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

    /// Writes everything, retrying interrupted and partial writes; stops on a closed pipe.
    public static func writeAll(_ handle: FileHandle, _ data: Data) {
        pipesFailQuietly
        let bytes = [UInt8](data)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { write(handle.fileDescriptor, $0.baseAddress, $0.count) }
            if n > 0 {
                sent += n
            } else if errno != EINTR {
                return
            }
        }
    }
}
