"""GET /metrics: the web side's figures, each from one source, exposed by prometheus_client.

Two sources, and nothing written by hand in the text format:

* Requests (`authsvc_http_requests_total{method,route,status}`, the latency
  histogram `authsvc_http_request_duration_seconds{method,route}`, and
  `authsvc_page_resends_suppressed_total{purpose}`) are prometheus_client
  metrics of each web process. Under `authsvc serve` PROMETHEUS_MULTIPROC_DIR
  is set (and emptied at start) before gunicorn forks, so each worker writes
  them to files there and a scrape, whichever worker answers it, reads them
  all: counters never go backwards between scrapes. Without the folder
  (tests, a bare WSGI server) they are this process's own. `route` is the URL
  rule, never the raw path, so a scanner cannot grow the label set.
* The outbox (OutboxCollector) is read from the database at scrape time, so
  every process and host reports the same figures: the live pending side
  and the counters the worker's statements keep (authsvc/outbox/admin.py,
  migrations/0026_baseline.sql). A database error is logged as `metrics_database_error`
  and the scrape answers `authsvc_database_up 0` with the request figures.

Behind `Authorization: Bearer <AUTHSVC_METRICS_TOKEN>` when it is set
(authsvc/observability/bearer.py): the send counters move only for known addresses.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
from flask import Blueprint, Flask, Response, current_app, g, request
from flask.blueprints import BlueprintSetupState
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from authsvc.observability.bearer import CHALLENGE, UNAUTHORIZED_BODY
from authsvc.observability.logs import log_event
from authsvc.outbox import STATUSES, admin
from authsvc.web.plumbing import bearer_token_matches, database_failed, db, services

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
HTTP_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
UNMATCHED_ROUTE = "unmatched"
# The send-latency histogram's bounds: outbox_latency_bounds() in SQL must match
# (admin.send_latency refuses a bound the counters do not keep).
LATENCY_BOUNDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
EVENT_COUNTERS = {
    "sent": ("authsvc_email_sends", "Emails accepted by the mail server."),
    "failed": ("authsvc_email_failures", "Jobs that failed for good."),
    "suppressed": ("authsvc_email_suppressed",
                   "Jobs not sent: the recipient is on the suppression list."),
    "retry": ("authsvc_email_retries", "Transient send failures scheduled for retry."),
    "ambiguous": ("authsvc_email_ambiguous", "Sends that broke after the final dot."),
    "lease_expired": ("authsvc_outbox_lease_expiries", "Re-claims after a lease expired."),
    "lease_lost": ("authsvc_outbox_lease_lost", "Outcomes dropped: the lease was lost."),
}


class HttpMetrics:
    """One app's request counter, latency histogram and suppressed-resend counter."""

    def __init__(self, multiprocess_dir: Path | None) -> None:
        self.multiprocess_dir = multiprocess_dir
        # In multiprocess mode the values live in files; the local registry is unused.
        self.registry = CollectorRegistry()
        registry = None if multiprocess_dir else self.registry
        self.requests = Counter(
            "authsvc_http_requests", "HTTP responses by method, route and status.",
            ["method", "route", "status"], registry=registry,
        )
        self.latency = Histogram(
            "authsvc_http_request_duration_seconds", "Seconds spent answering, by route.",
            ["method", "route"], buckets=HTTP_LATENCY_BUCKETS, registry=registry,
        )
        self.resends_suppressed = Counter(
            "authsvc_page_resends_suppressed",
            '"Send a new link" requests the per-address email limit held back.',
            ["purpose"], registry=registry,
        )
        for purpose in ("verify", "reset", "sign_in"):  # pages/link_problem.py RESENDABLE
            self.resends_suppressed.labels(purpose)  # shown as 0 before the first

    def observe(self, method: str, route: str | None, status: int, seconds: float) -> None:
        label = route or UNMATCHED_ROUTE
        self.requests.labels(method, label, str(status)).inc()
        self.latency.labels(method, label).observe(seconds)

    def collector(self) -> Collector:
        """Every process's figures (the multiprocess files), or this process's."""
        if self.multiprocess_dir is None:
            return self.registry
        return MultiProcessCollector(None, path=str(self.multiprocess_dir))


class OutboxCollector(Collector):
    """The outbox figures, read by `read` at each collect(); a database error is logged
    and reported as authsvc_database_up 0 (then no outbox family at all, not zeros)."""

    def __init__(self, read: Callable[[], admin.OutboxFigures]) -> None:
        self._read = read

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("authsvc_database_up", "Whether the outbox figures could be read.")
        try:
            figures = self._read()
        except psycopg.Error as exc:
            log_event(log, "metrics_database_error", logging.WARNING,
                      error_type=type(exc).__name__, error=str(exc).strip())
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from outbox_families(figures)


def outbox_families(figures: admin.OutboxFigures) -> Iterator[Metric]:
    """The outbox's metric families: gauges of the jobs now, counters since install."""
    stats = figures.stats
    jobs = GaugeMetricFamily("authsvc_outbox_jobs", "Outbox jobs by status.", labels=["status"])
    for status in STATUSES:
        jobs.add_metric([status], getattr(stats, status))
    yield jobs
    yield GaugeMetricFamily("authsvc_outbox_depth", "Pending jobs due now and not leased.",
                            value=stats.due)
    yield GaugeMetricFamily("authsvc_outbox_leased", "Jobs under a live lease.",
                            value=stats.leased)
    yield GaugeMetricFamily("authsvc_outbox_oldest_pending_age_seconds",
                            "Age of the oldest pending job.", value=stats.oldest_pending_seconds)
    for event, (name, help_text) in EVENT_COUNTERS.items():
        yield CounterMetricFamily(name, help_text, value=figures.event_totals.get(event, 0))
    latency = figures.latency
    yield HistogramMetricFamily(
        "authsvc_email_send_latency_seconds", "Seconds from queueing to acceptance, sent jobs.",
        buckets=[(f"{bound:g}", count) for bound, count in latency.buckets]
        + [("+Inf", latency.sent)],
        sum_value=latency.total_seconds,
    )


bp = Blueprint("metrics", __name__)


def web_metrics(app: Flask) -> HttpMetrics:
    """This app's prometheus_client metrics (installed with the blueprint)."""
    http: HttpMetrics = app.extensions["authsvc_metrics"]
    return http


@bp.record_once
def _install(state: BlueprintSetupState) -> None:
    settings = state.app.extensions["authsvc"].settings
    state.app.extensions["authsvc_metrics"] = HttpMetrics(settings.metrics_multiproc_dir)


@bp.before_app_request
def _start_timer() -> None:
    g.authsvc_request_started = time.perf_counter()


@bp.after_app_request
def _count(response: Response) -> Response:
    started = g.get("authsvc_request_started", time.perf_counter())
    rule = request.url_rule.rule if request.url_rule is not None else None
    web_metrics(current_app).observe(
        request.method, rule, response.status_code, time.perf_counter() - started
    )
    return response


def _read_outbox() -> admin.OutboxFigures:
    try:
        return admin.outbox_figures(db(), LATENCY_BOUNDS)
    except psycopg.Error:
        database_failed()  # so the next scrape does not find the next dead connection
        raise


@bp.get("/metrics")
def metrics() -> Response:
    """Prometheus text exposition of requests and outbox figures."""
    token = services().settings.metrics_token
    if token and not bearer_token_matches(token):
        return Response(
            UNAUTHORIZED_BODY,
            status=401,
            content_type="text/plain; charset=utf-8",
            headers={"WWW-Authenticate": CHALLENGE},
        )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(web_metrics(current_app).collector())
    registry.register(OutboxCollector(_read_outbox))
    return Response(generate_latest(registry), content_type=CONTENT_TYPE)
