/// The release every member of this build reports (Ping's `version`, the edge's health check,
/// `frienso-launch status`): one place to change it.
public enum FriensoVersion {
    public static let current = "0.1.0"
}
