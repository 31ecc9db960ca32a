"""The worker's own Prometheus metrics, served on `authsvc worker --metrics-port`.

The outbox gauges (depth, oldest pending, sends per status) come from the
database through the web app's /metrics and are the same on every host;
these are what only this worker process knows: claims, outcomes by event,
seconds per send, and how many claimed jobs it holds right now. Each worker
process serves its own registry (prometheus_client's small HTTP server, on
loopback unless told otherwise); with --processes N the children take
consecutive ports from --metrics-port.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

SEND_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class WorkerMetrics:
    """Counters of one worker process, in a registry of its own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.claimed = Counter("authsvc_worker_claimed_jobs", "Jobs this worker claimed.",
                               registry=self.registry)
        self.outcomes = Counter("authsvc_worker_outcomes",
                                "Outcomes this worker decided, by event.",
                                ["event"], registry=self.registry)
        self.send_seconds = Histogram("authsvc_worker_send_seconds",
                                      "Seconds from a sender taking a job to its outcome.",
                                      buckets=SEND_BUCKETS, registry=self.registry)
        self.unfinished = Gauge("authsvc_worker_unfinished_jobs",
                                "Claimed by this process and not yet recorded.",
                                registry=self.registry)
        self.database_errors = Counter("authsvc_worker_database_errors",
                                       "Claim rounds that failed on the database.",
                                       registry=self.registry)

    def serve(self, port: int, host: str = "127.0.0.1") -> None:
        """Answer GET /metrics on host:port from a daemon thread."""
        start_http_server(port, addr=host, registry=self.registry)
