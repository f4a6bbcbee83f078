/// Every metric Frienso records, with the help text the launcher adds when it serves them
/// (swift-metrics has no help text of its own; Prometheus's linter wants one per family).
/// A metric missing here is served without help, and `promtool check metrics` in the end-to-end
/// test names it.
public enum MetricCatalog {
    public static let help: [String: String] = [
        // Every host (Wire).
        "frienso_requests_total": "Requests answered, by method and status (refused, busy and expired ones included).",
        "frienso_request_duration_seconds": "Time from a request's arrival to its reply, by method.",
        "frienso_requests_in_flight": "Requests accepted and not answered yet.",
        "frienso_batch_frames_total": "Batch frames (several envelopes in one message) taken from the deployment's own clients (in) and sent back with several replies (out).",
        "frienso_peer_calls_total": "Calls this service made to another, by method and the status it got (the client's own UNAVAILABLE and DEADLINE_EXCEEDED included).",
        "frienso_peer_call_duration_seconds": "Time from a call to another service to its answer, as the caller sees it, by method.",
        "frienso_replica_lag_events": "Events the publisher had sent that the replica had not applied, at its last check.",
        "frienso_replica_snapshots_total": "Snapshots a replica loaded (the first, then one per gap or publisher restart).",
        // Storage.
        "frienso_group_commit_items": "Items written per group commit (one transaction and one fsync each).",
        "frienso_group_commit_duration_seconds": "Time to write and fsync one group commit.",
        "frienso_group_commit_waiting": "Items waiting for the next group commit.",
        "frienso_group_commit_failures_total": "Group commits that failed (none of their items acknowledged).",
        "frienso_batched_writes_items": "Items of a service's own batches (geo's location updates) per write-queue commit they rode in.",
        // Alerts.
        "frienso_delivery_attempts_total": "SMS and push attempts answered, by channel, provider and outcome.",
        "frienso_deliveries_failed_total": "Deliveries that failed for good, by channel and what raised them.",
        "frienso_outbox_pending": "Deliveries waiting in the outbox, by channel.",
        "frienso_outbox_oldest_pending_seconds": "Age of the oldest delivery waiting in the outbox, by channel.",
        // Geo.
        "frienso_geo_index_users": "People in the spatial index.",
        "frienso_geo_latest_fixes": "People with a latest location in memory.",
        // The gateway and the edge.
        "frienso_event_subscribers": "Connections subscribed to live events (the gateway's subscriptions, the edge's WebSockets).",
        "frienso_http_requests_total": "HTTP requests the edge answered, by route, method and status.",
        "frienso_http_request_duration_seconds": "Time the edge took to answer an HTTP request, by route.",
        // The process (ServiceMetrics).
        "process_cpu_seconds_total": "User and system CPU time spent, in seconds.",
        "process_resident_memory_bytes": "Resident memory size, in bytes.",
        "process_virtual_memory_bytes": "Virtual memory size, in bytes.",
        "process_threads": "Threads of the process.",
        "process_open_fds": "Open file descriptors.",
        "process_start_time_seconds": "Start time of the process since the Unix epoch, in seconds.",
    ]
}
