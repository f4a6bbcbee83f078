import Wire

/// The statuses the quota refusals get (the store checks the quotas, not the statuses).
extension QuotaRefusal: RPCErrorConvertible {
    var rpcError: RPCError {
        switch self {
        case .uploadRate(let perHour): .resourceExhausted("upload rate: at most \(perHour) uploads an hour; try again later")
        case .storage(let used, let quota, let wanted):
            .resourceExhausted("storage quota: \(used) of \(quota) bytes used; delete photos to make room for \(wanted) more")
        }
    }
}
