import ArgumentParser

@main
struct Frienso: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frienso",
        abstract: "Frienso: find friends and keep each other safe.",
        discussion: """
            Talks to the Frienso gateway (--gateway, or FRIENSO_GATEWAY; default \(defaultGateway)).
            Errors print their status code; the exit code is 10 + the code's number (see docs/protocol.md).
            """,
        subcommands: [
            Register.self, Login.self, Logout.self, WhoAmI.self, Profile.self,
            PasswordCommand.self, ChangeEmail.self, AccountCommand.self, Ping.self,
            Friends.self, Circle.self, Search.self, PokeCommand.self, Block.self, Unblock.self, Blocked.self,
            Recommend.self, Findable.self, ExchangeCommand.self,
            Locate.self, Nearby.self, Navigate.self, Sharing.self, Ghost.self, PrecisionCommand.self, ZoneCommand.self, PlaceAlertCommand.self, AuditCommand.self, ShareCommand.self, Proximity.self, History.self, Events.self,
            Places.self, Venues.self, CheckInCommand.self, CheckIns.self,
            Watch.self, TimerCommand.self, HelpNow.self, Inbox.self, Devices.self, Resources.self, Outbox.self,
            Photo.self, MapCommand.self,
        ])
}
