import Foundation

/// The logged-in session, kept in `<config-dir>/session.json` with mode 0600 (the folder 0700).
struct SessionFile {
    struct Contents: Codable {
        var gateway: String
        var token: String
        var userId: String
        var username: String
        var expiresAtMs: Int64
    }

    let directory: String
    var path: String { "\(directory)/session.json" }

    func load() -> Contents? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return try? JSONDecoder().decode(Contents.self, from: data)
    }

    /// Writes the file so that no other user can read it at any moment.
    func save(_ contents: Contents) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let data = try JSONEncoder().encode(contents)
        let temp = "\(path).\(getpid()).tmp"
        let fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw CLIError(message: "cannot write \(temp): \(String(cString: strerror(errno)))", exitCode: 1) }
        let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        fsync(fd)
        close(fd)
        guard written == data.count, rename(temp, path) == 0 else {
            unlink(temp)
            throw CLIError(message: "cannot write \(path)", exitCode: 1)
        }
    }

    func remove() {
        unlink(path)
    }
}
