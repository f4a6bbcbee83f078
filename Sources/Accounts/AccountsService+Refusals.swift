import Wire

/// The statuses the account rules' refusals get (the store knows the rules, not the statuses).
extension AccountRefusal: RPCErrorConvertible {
    var rpcError: RPCError {
        switch self {
        case .noAccount(let id): .notFound("no account \(id)")
        case .noUser(let id): .notFound("no user \(id)")
        case .linkedElsewhere(let provider, let id): .alreadyExists("external_id: \(provider) \(id) is linked to another account")
        case .notLinked(let provider, let id): .notFound("external_id: \(provider) \(id) is not linked to your account")
        case .taken(let field?): .alreadyExists("\(field): already registered")
        case .taken(nil): .alreadyExists("already registered")
        }
    }
}
