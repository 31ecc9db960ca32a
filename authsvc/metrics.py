"""GET /metrics: Prometheus text format.

Request counts and latencies come from prometheus_client (authsvc/http_metrics.py),
summed over every gunicorn worker of this host under `authsvc serve`. Outbox
figures are read from the database at scrape time, so every process and host
reports the same ones. The event counters and the latency histogram are
totals since install (migrations/0011_outbox_counters.sql): `authsvc outbox
prune` lowers the per-status gauges, never the counters.
"""

from __future__ import annotations

import time

from flask import Blueprint, Flask, Response, current_app, g, request
from flask.blueprints import BlueprintSetupState
from psycopg import Connection

from authsvc.bearer import CHALLENGE, UNAUTHORIZED_BODY
from authsvc.http_metrics import HttpMetrics
from authsvc.outbox import STATUSES, admin
from authsvc.web import bearer_token_matches, database_failed, db, services

LATENCY_BOUNDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
EVENT_COUNTERS = {
    "sent": ("authsvc_email_sends_total", "Emails accepted by the mail server."),
    "failed": ("authsvc_email_failures_total", "Jobs that failed for good."),
    "suppressed": ("authsvc_email_suppressed_total",
                   "Jobs not sent: the recipient is on the suppression list."),
    "retry": ("authsvc_email_retries_total", "Transient send failures scheduled for retry."),
    "ambiguous": ("authsvc_email_ambiguous_total", "Sends that broke after the final dot."),
    "lease_expired": ("authsvc_outbox_lease_expiries_total", "Re-claims after a lease expired."),
    "lease_lost": ("authsvc_outbox_lease_lost_total", "Outcomes dropped: the lease was lost."),
}

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


def _family(lines: list[str], name: str, kind: str, help_text: str) -> None:
    lines.append(f"# HELP {name} {help_text}")
    lines.append(f"# TYPE {name} {kind}")


def _outbox_lines(conn: Connection) -> list[str]:
    lines: list[str] = []
    # The same figures `authsvc outbox stats` prints (one query, one due rule),
    # all read after one fold of the counters.
    figures = admin.outbox_figures(conn, LATENCY_BOUNDS)
    stats = figures.stats
    _family(lines, "authsvc_outbox_jobs", "gauge", "Outbox jobs by status.")
    for status in STATUSES:
        lines.append(f'authsvc_outbox_jobs{{status="{status}"}} {getattr(stats, status)}')
    _family(lines, "authsvc_outbox_depth", "gauge", "Pending jobs due now and not leased.")
    lines.append(f"authsvc_outbox_depth {stats.due}")
    _family(lines, "authsvc_outbox_leased", "gauge", "Jobs under a live lease.")
    lines.append(f"authsvc_outbox_leased {stats.leased}")
    _family(lines, "authsvc_outbox_oldest_pending_age_seconds", "gauge",
            "Age of the oldest pending job.")
    lines.append(f"authsvc_outbox_oldest_pending_age_seconds {stats.oldest_pending_seconds:.3f}")

    totals = figures.event_totals
    for event, (name, help_text) in EVENT_COUNTERS.items():
        _family(lines, name, "counter", help_text)
        lines.append(f"{name} {totals.get(event, 0)}")

    name = "authsvc_email_send_latency_seconds"
    _family(lines, name, "histogram", "Seconds from queueing to acceptance, sent jobs.")
    latency = figures.latency
    for bound, count in latency.buckets:
        lines.append(f'{name}_bucket{{le="{bound:g}"}} {count}')
    lines.append(f'{name}_bucket{{le="+Inf"}} {latency.sent}')
    lines.append(f"{name}_sum {latency.total_seconds:.3f}")
    lines.append(f"{name}_count {latency.sent}")
    return lines


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
    lines: list[str] = [web_metrics(current_app).exposition().rstrip("\n")]
    try:
        outbox = _outbox_lines(db())
        up = 1
    except Exception:  # a scrape must still answer when the database does not
        outbox, up = [], 0
        database_failed()  # so the next scrape does not find the next dead connection
    _family(lines, "authsvc_database_up", "gauge", "Whether the outbox figures could be read.")
    lines.append(f"authsvc_database_up {up}")
    lines += outbox
    body = "\n".join(lines) + "\n"
    return Response(body, content_type="text/plain; version=0.0.4; charset=utf-8")
