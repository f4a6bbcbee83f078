import Wire

/// The statuses the social rules' refusals get (the stores know the rules, not the statuses).
extension CircleRefusal: RPCErrorConvertible {
    var rpcError: RPCError {
        switch self {
        case .yourself: .failedPrecondition("you cannot add yourself to your core circle")
        case .notFriends: .failedPrecondition("only friends can be in your core circle: send a friend request first")
        case .alreadyMember: .alreadyExists("already in your core circle")
        case .full(let limit): .failedPrecondition("your core circle is full (\(limit) people): remove someone first")
        case .notMember: .notFound("not in your core circle")
        case .noPendingRequest(let owner): .notFound("no pending core circle request from user \(owner)")
        }
    }
}

extension ExchangeRefusal: RPCErrorConvertible {
    var rpcError: RPCError {
        switch self {
        case .yourself: .failedPrecondition("you cannot exchange contacts with yourself")
        case .blocked: .failedPrecondition("you cannot exchange contacts with this user")
        case .callerNotFindable: .failedPrecondition("turn findable on first (frienso findable on)")
        case .notFindable(let user): .failedPrecondition("user \(user) is not findable")
        }
    }
}

extension FriendRefusal: RPCErrorConvertible {
    var rpcError: RPCError {
        switch self {
        case .requestToYourself: .failedPrecondition("you cannot send a friend request to yourself")
        case .requestAcrossBlock: .failedPrecondition("you cannot send a friend request to this user")
        case .alreadyFriends: .failedPrecondition("you are already friends")
        case .noRequest(let id): .notFound("no friend request \(id)")
        case .notAddressedToYou(let id): .permissionDenied("friend request \(id) is not addressed to you")
        case .answeredAlready(let id, let state):
            .failedPrecondition("friend request \(id) is \(state.protoName.dropFirst("REQUEST_STATE_".count).lowercased()) already")
        case .unknownAction: .invalidArgument("action: accept, reject or dismiss")
        case .notYourRequest(let id): .permissionDenied("only the sender can cancel friend request \(id)")
        case .noLongerPending(let id): .failedPrecondition("friend request \(id) is no longer pending")
        case .notFriends(let other): .notFound("you are not friends with user \(other)")
        case .blockYourself: .failedPrecondition("you cannot block yourself")
        case .notBlocked(let other): .notFound("user \(other) is not blocked")
        case .pokeYourself: .failedPrecondition("you cannot poke yourself")
        case .pokeStranger: .failedPrecondition("you can only poke friends")
        case .pokedRecently(let ago, let wait): .resourceExhausted("you poked them \(ago / 1000) s ago: wait \((wait + 999) / 1000) s")
        }
    }
}

extension GraphSnapshotCursor.NotACursor: RPCErrorConvertible {
    var rpcError: RPCError { .invalidArgument("cursor: not a cursor from a previous page") }
}
