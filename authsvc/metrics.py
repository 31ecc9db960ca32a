"""GET /metrics: Prometheus text format.

Request counts and latencies come from prometheus_client (authsvc/http_metrics.py),
summed over every gunicorn worker of this host under `authsvc serve`. Outbox
figures are read from the database at scrape time, so every process and host
reports the same ones; the event totals shrink when `authsvc outbox prune`
deletes old trails, which Prometheus treats as a counter reset.
"""

from __future__ import annotations

import time
from pathlib import Path

from flask import Blueprint, Flask, Response, current_app, g, request
from flask.blueprints import BlueprintSetupState
from psycopg import Connection

from authsvc.http_metrics import HttpMetrics
from authsvc.queries import load_queries
from authsvc.web import bearer_token_matches, db, services

Q = load_queries(Path(__file__).parent / "sql" / "metrics.sql")
LATENCY_BOUNDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
EVENT_COUNTERS = {
    "sent": ("authsvc_email_sends_total", "Emails accepted by the mail server."),
    "failed": ("authsvc_email_failures_total", "Jobs that failed for good."),
    "retry": ("authsvc_email_retries_total", "Transient send failures scheduled for retry."),
    "ambiguous": ("authsvc_email_ambiguous_total", "Sends that broke after the final dot."),
    "lease_expired": ("authsvc_outbox_lease_expiries_total", "Re-claims after a lease expired."),
    "lease_lost": ("authsvc_outbox_lease_lost_total", "Outcomes dropped: the lease was lost."),
}

bp = Blueprint("metrics", __name__)


def _http(app: Flask) -> HttpMetrics:
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
    _http(current_app).observe(
        request.method, rule, response.status_code, time.perf_counter() - started
    )
    return response


def _family(lines: list[str], name: str, kind: str, help_text: str) -> None:
    lines.append(f"# HELP {name} {help_text}")
    lines.append(f"# TYPE {name} {kind}")


def _outbox_lines(conn: Connection) -> list[str]:
    lines: list[str] = []
    cur = conn.execute(Q["outbox_gauges"])
    row = cur.fetchone()
    assert row is not None and cur.description is not None
    gauges = dict(zip([c.name for c in cur.description], row, strict=True))
    _family(lines, "authsvc_outbox_jobs", "gauge", "Outbox jobs by status.")
    for status in ("pending", "sent", "failed", "superseded", "expired"):
        lines.append(f'authsvc_outbox_jobs{{status="{status}"}} {gauges[status]}')
    _family(lines, "authsvc_outbox_depth", "gauge", "Pending jobs due now and not leased.")
    lines.append(f"authsvc_outbox_depth {gauges['due']}")
    _family(lines, "authsvc_outbox_leased", "gauge", "Jobs under a live lease.")
    lines.append(f"authsvc_outbox_leased {gauges['leased']}")
    _family(lines, "authsvc_outbox_oldest_pending_age_seconds", "gauge",
            "Age of the oldest pending job.")
    oldest = gauges["oldest_pending_seconds"]
    lines.append(f"authsvc_outbox_oldest_pending_age_seconds {oldest:.3f}")

    totals = {str(event): int(total) for event, total in conn.execute(Q["event_totals"])}
    for event, (name, help_text) in EVENT_COUNTERS.items():
        _family(lines, name, "counter", help_text)
        lines.append(f"{name} {totals.get(event, 0)}")

    name = "authsvc_email_send_latency_seconds"
    _family(lines, name, "histogram", "Seconds from queueing to acceptance, sent jobs.")
    for bound, count in conn.execute(Q["send_latency"], {"bounds": list(LATENCY_BOUNDS)}):
        lines.append(f'{name}_bucket{{le="{bound:g}"}} {count}')
    sum_row = conn.execute(Q["send_latency_totals"]).fetchone()
    assert sum_row is not None
    lines.append(f'{name}_bucket{{le="+Inf"}} {sum_row[1]}')
    lines.append(f"{name}_sum {sum_row[0]:.3f}")
    lines.append(f"{name}_count {sum_row[1]}")
    return lines


@bp.get("/metrics")
def metrics() -> Response:
    """Prometheus text exposition of requests and outbox figures."""
    token = services().settings.metrics_token
    if token and not bearer_token_matches(token):
        return Response(
            "send Authorization: Bearer <AUTHSVC_METRICS_TOKEN>\n",
            status=401,
            content_type="text/plain; charset=utf-8",
            headers={"WWW-Authenticate": 'Bearer realm="authsvc metrics"'},
        )
    lines: list[str] = [_http(current_app).exposition().rstrip("\n")]
    try:
        outbox = _outbox_lines(db())
        up = 1
    except Exception:  # a scrape must still answer when the database does not
        outbox, up = [], 0
    _family(lines, "authsvc_database_up", "gauge", "Whether the outbox figures could be read.")
    lines.append(f"authsvc_database_up {up}")
    lines += outbox
    body = "\n".join(lines) + "\n"
    return Response(body, content_type="text/plain; version=0.0.4; charset=utf-8")
