import Foundation

/// Where the frienso-* programs are: built and installed side by side.
public enum Executables {
    /// The folder holding the running executable (symbolic links resolved).
    public static var folder: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent().path
    }
}
