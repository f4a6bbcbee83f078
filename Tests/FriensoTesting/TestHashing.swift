/// Argon2id with libsodium's smallest sensible cost, for test stacks that are not about
/// passwords: the whole suite registers many users in parallel on two cores.
public enum TestHashing {
    public static let opsLimit: UInt64 = 1
    public static let memLimit = 8 << 20
    public static let lanes = 2
}
