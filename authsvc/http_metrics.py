"""The web processes' own metrics through prometheus_client, summed over every gunicorn worker.

Under `authsvc serve` PROMETHEUS_MULTIPROC_DIR is set (and emptied at
start) before gunicorn forks, so each worker process writes its counters to
files there and a scrape, whichever worker answers it, reads them all:
counters never go backwards between scrapes. Without the folder (tests, a
bare WSGI server) the figures are this process's own.

Series: authsvc_http_requests_total{method,route,status} and the latency
histogram authsvc_http_request_duration_seconds{method,route}. `route` is
the URL rule (`/api/v1/signups`), never
the raw path, so a scanner cannot grow the label set. Also
authsvc_page_resends_suppressed_total{purpose}: "Send a new link" requests
the per-address email limit held back (the page does not say so).
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
UNMATCHED_ROUTE = "unmatched"


class HttpMetrics:
    """One app's request counter, latency histogram and suppressed-resend counter."""

    def __init__(self, multiprocess_dir: Path | None) -> None:
        self.multiprocess_dir = multiprocess_dir
        # In multiprocess mode the values live in files; the local registry is unused.
        self._registry = CollectorRegistry()
        registry = None if multiprocess_dir else self._registry
        self.requests = Counter(
            "authsvc_http_requests", "HTTP responses by method, route and status.",
            ["method", "route", "status"], registry=registry,
        )
        self.latency = Histogram(
            "authsvc_http_request_duration_seconds", "Seconds spent answering, by route.",
            ["method", "route"], buckets=LATENCY_BUCKETS, registry=registry,
        )
        self.resends_suppressed = Counter(
            "authsvc_page_resends_suppressed",
            '"Send a new link" requests the per-address email limit held back.',
            ["purpose"], registry=registry,
        )
        for purpose in ("verify", "reset"):
            self.resends_suppressed.labels(purpose)  # shown as 0 before the first

    def observe(self, method: str, route: str | None, status: int, seconds: float) -> None:
        label = route or UNMATCHED_ROUTE
        self.requests.labels(method, label, str(status)).inc()
        self.latency.labels(method, label).observe(seconds)

    def exposition(self) -> str:
        """The text format of every process's figures (or this one's)."""
        if self.multiprocess_dir is None:
            return generate_latest(self._registry).decode()
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=str(self.multiprocess_dir))
        return generate_latest(registry).decode()


def prepare_multiprocess_dir(folder: Path) -> Path:
    """Create `folder` and remove a previous run's files (they belong to dead processes)."""
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.db"):
        stale.unlink()
    return folder
