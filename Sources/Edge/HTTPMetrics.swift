import CoreMetrics
import Foundation
import HTTPTypes
import Hummingbird
import Synchronization
import Wire

/// The edge's HTTP requests in metrics (through swift-metrics; the executable's backend renders
/// them): `frienso_http_requests_total{route,method,status}` and
/// `frienso_http_request_duration_seconds{route}`. The route is the matched pattern
/// (`/v1/{service}/{rpc}`, not the address asked), `static` for the web app's files and `other`
/// for what matched nothing, and the HTTP method one of the standard ones or `other`: a client
/// chooses both and must not choose the series. (Hummingbird's own MetricsMiddleware labels any
/// method a client invents.)
struct HTTPMetricsMiddleware: RouterMiddleware {
    typealias Context = EdgeContext
    static let methods: Set<String> = ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"]

    func handle(_ request: Request, context: EdgeContext, next: (Request, EdgeContext) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        let method = Self.methods.contains(request.method.rawValue) ? request.method.rawValue : "other"
        do {
            let response = try await next(request, context)
            record(route: context.endpointPath ?? (response.status == .ok || response.status == .notModified ? "static" : "other"),
                   method: method, status: response.status.code, since: started)
            return response
        } catch {
            record(route: context.endpointPath ?? "other", method: method, status: (error as? any HTTPResponseError)?.status.code ?? 500,
                   since: started)
            throw error
        }
    }

    let handles = HTTPMetricHandles()

    private func record(route: String, method: String, status: Int, since started: ContinuousClock.Instant) {
        let (counter, timer) = handles.handles(route: route, method: method, status: status)
        counter.increment()
        let (seconds, attoseconds) = started.duration(to: .now).components
        timer.recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}

/// Each series' handles, made the first time they are needed and kept: a handle made for each
/// request looked its series up in the metrics backend every time (2% of the edge's CPU,
/// `docs/benchmarks.md` item 131). Routes, methods and statuses are few (see above), so few are kept.
final class HTTPMetricHandles: Sendable {
    private struct Key: Hashable {
        let route: String, method: String, status: Int
    }

    private let kept = Mutex<[Key: (Counter, CoreMetrics.Timer)]>([:])

    func handles(route: String, method: String, status: Int) -> (Counter, CoreMetrics.Timer) {
        let key = Key(route: route, method: method, status: status)
        return kept.withLock { kept in
            if let handles = kept[key] { return handles }
            let handles = (Counter(label: "frienso_http_requests_total", dimensions: [("route", route), ("method", method), ("status", String(status))]),
                           CoreMetrics.Timer(label: "frienso_http_request_duration_seconds", dimensions: [("route", route)]))
            kept[key] = handles
            return handles
        }
    }
}

extension EdgeRoutes {
    /// `GET /metrics`: the edge's metrics in Prometheus's text format, for the launcher, which
    /// proves itself with `Authorization: Bearer <scrape token, hex>` (docs/security.md).
    func metrics(_ request: Request) async -> Response {
        guard let metrics = config.core.metrics else { return error(.notFound, "this edge exports no metrics") }
        if let token = metrics.token {
            let given = Self.bearer(request).flatMap(Hex.decode) ?? []
            guard ScrapeToken.equal(given, token) else {
                return error(.permissionDenied, "/metrics answers the launcher only: the scrape token does not match")
            }
        }
        return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .cacheControl: "no-store"],
                        body: .init(byteBuffer: ByteBuffer(string: await metrics.render())))
    }
}
