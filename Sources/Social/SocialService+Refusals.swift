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
