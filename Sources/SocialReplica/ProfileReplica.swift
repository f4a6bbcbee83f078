public import FriensoProto
public import Logging
public import Wire
import Synchronization

/// Every user's public profile (name, username, picture), kept in memory from accounts'
/// `profiles` stream and `ProfilesSnapshot` (a Clone replica): social shows friend lists of 200
/// and alerts names a helpNow's circle without a call to accounts each time (and while accounts
/// restarts). Until the first snapshot is loaded, and for a user whose event has not arrived
/// yet, they ask accounts as before.
public struct ProfileDirectory: Sendable {
    var byID: [UInt64: AccountsV1.Profile] = [:]
    /// Changes with every profile put, never repeats (across snapshots too): what a cached
    /// friend list remembers to know no name in it changed since.
    public private(set) var version: UInt64 = 0
    private static let versions = Atomic<UInt64>(0)

    public init() {}

    public var count: Int { byID.count }

    public subscript(id: UInt64) -> AccountsV1.Profile? { byID[id] }

    mutating func put(_ profile: AccountsV1.Profile) {
        version = Self.versions.add(1, ordering: .relaxed).newValue
        byID[profile.userId] = profile
    }

    /// A deleted account: its profile goes (and the version moves, so no cached list keeps it).
    mutating func remove(_ user: UInt64) {
        version = Self.versions.add(1, ordering: .relaxed).newValue
        byID[user] = nil
    }
}

/// Accounts' `profiles` stream as a Clone model: each event is a whole profile.
public enum ProfileModel: CloneModel {
    public static let stream = "profiles"
    public static func decode(_ payload: [UInt8]) -> AccountsV1.ProfileChanged? {
        guard let event = try? AccountsV1.ProfileChanged(serializedBytes: payload), event.profile != nil else { return nil }
        return event
    }
    public static func apply(_ event: AccountsV1.ProfileChanged, to state: inout ProfileDirectory) {
        guard let profile = event.profile else { return }
        if event.deleted { state.remove(profile.userId) } else { state.put(profile) }
    }
    public static func describe(_ state: ProfileDirectory) -> Logger.Metadata { ["profiles": "\(state.count)"] }
}

public typealias ProfileReplica = CloneReplica<ProfileModel>

extension CloneReplica where Model == ProfileModel {
    /// A replica of accounts' profiles.
    /// - Parameters:
    ///   - accounts: accounts' request endpoint (`ProfilesSnapshot` is internal to social).
    ///   - eventsEndpoint: accounts' PUB endpoint; `eventsSecurity` how to authenticate to it.
    public static func profiles(accounts: any RPCCalling, eventsEndpoint: String, eventsSecurity: ClientSecurity = .plaintext,
                                logger: Logger, checkInterval: Duration = .seconds(5), pageSize: UInt32 = 5_000,
                                context: ZMQContext = .shared, reactor: Reactor = .shared) -> ProfileReplica {
        let options = CallOptions(deadline: .seconds(30))
        let api = AccountsV1.AccountsService.self
        return ProfileReplica(
            initial: ProfileDirectory(), eventsEndpoint: eventsEndpoint, eventsSecurity: eventsSecurity, logger: logger,
            checkInterval: checkInterval, context: context, reactor: reactor,
            snapshot: {
                restart: while true {
                    var page = try await accounts.call(api.profilesSnapshot, AccountsV1.ProfilesSnapshotRequest(limit: pageSize), options: options)
                    let head = CloneHead(epoch: page.epoch, sequence: page.sequence)
                    var directory = ProfileDirectory()
                    while true {
                        for profile in page.profiles { directory.put(profile) }
                        guard page.more, let last = page.profiles.last?.userId else { break }
                        page = try await accounts.call(api.profilesSnapshot, AccountsV1.ProfilesSnapshotRequest(afterUserId: last, limit: pageSize),
                                                       options: options)
                        if page.epoch != head.epoch { continue restart } // accounts restarted mid-way
                    }
                    return (directory, head)
                }
            },
            head: {
                let head = try await accounts.call(api.profilesSnapshot, AccountsV1.ProfilesSnapshotRequest(sequenceOnly: true),
                                                   options: CallOptions(deadline: .seconds(2)))
                return CloneHead(epoch: head.epoch, sequence: head.sequence)
            })
    }
}
