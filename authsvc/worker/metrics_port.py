"""The worker's own Prometheus metrics, served on `authsvc worker --metrics-port`.

The outbox gauges (depth, oldest pending, sends per status) come from the
database through the web app's /metrics and are the same on every host;
these are what only this worker process knows: claims, outcomes by event,
seconds per send, and how many claimed jobs it holds right now. Each worker
process serves its own registry (prometheus_client's WSGI app on a small
threaded server, on loopback unless told otherwise); with --processes N the
children take consecutive ports from --metrics-port. With
AUTHSVC_METRICS_TOKEN set, a scrape needs it as /metrics does: the claim
counter moves only when a job was queued, so in the open it would tell which
addresses have accounts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from authsvc.observability.bearer import CHALLENGE, UNAUTHORIZED_BODY, authorization_presents

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

    def serve(self, port: int, host: str = "127.0.0.1", token: str | None = None) -> None:
        """Answer GET /metrics on host:port from a daemon thread; with a token, only to it."""
        app = guarded(make_wsgi_app(self.registry), token)
        server = make_server(host, port, app, ThreadingWSGIServer, handler_class=_QuietHandler)
        threading.Thread(target=server.serve_forever, name="worker-metrics", daemon=True).start()


WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def guarded(app: WsgiApp, token: str | None) -> WsgiApp:
    """`app` behind `Authorization: Bearer <token>` (the web /metrics rule); open without one."""
    if not token:
        return app
    expected = token

    def check(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if authorization_presents(environ.get("HTTP_AUTHORIZATION", ""), expected):
            return app(environ, start_response)
        start_response("401 Unauthorized", [
            ("Content-Type", "text/plain; charset=utf-8"), ("WWW-Authenticate", CHALLENGE),
        ])
        return [UNAUTHORIZED_BODY.encode()]

    return check


class _QuietHandler(WSGIRequestHandler):
    """No access line on stderr per scrape (the worker logs JSON lines only)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass
