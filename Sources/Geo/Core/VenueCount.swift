import FriensoProto

/// How many people are at a venue, told so that the count cannot single anyone out:
/// - someone in ghost mode is not counted at all (ghost mode hides them from everyone);
/// - a friend counts as a friend only when the viewer may see their location (sharing on, not a
///   ghost, not blocked, or a live grant): otherwise "1 friend" at a venue would say where a
///   friend is who chose not to say it;
/// - a total below `minimum` (k) is withheld ("fewer than k"): a count of one or two next to a
///   venue, read twice, tells who came or left. The friends the viewer may see are still given
///   (the viewer sees them on the map anyway).
struct VenueCount: Sendable, Equatable {
    var people = 0
    var friends = 0

    mutating func add(ghost: Bool, visibleFriend: Bool) {
        guard !ghost else { return }
        people += 1
        if visibleFriend { friends += 1 }
    }

    func attendance(of venue: GeoV1.Place, minimum: Int) -> GeoV1.VenueAttendance {
        let few = people < minimum
        return GeoV1.VenueAttendance(venue: venue, people: few ? 0 : UInt32(people), friends: UInt32(friends), few: few)
    }
}
