"""GET /metrics: what a Prometheus scrape of the service reports."""

from __future__ import annotations

import logging
import re

import psycopg

from authsvc.worker.jobs import Outcome, claim_batch, record_outcomes
from tests.worker_support import queue_notices


def _value(body: str, series: str) -> float:
    match = re.search(rf"^{re.escape(series)} (\S+)$", body, re.MULTILINE)
    assert match, f"{series} missing from /metrics"
    return float(match.group(1))


def test_metrics_report_requests_and_outbox_state_from_the_database(client, conn):
    ids = queue_notices(conn, 5)
    # The first job's first worker died mid-send; a second one took its lease over.
    claim_batch(conn, "dead:1:0", 1, 30)
    conn.execute("UPDATE email_jobs SET lease_expires_at = now() - interval '1 minute',"
                 " next_attempt_at = now() - interval '1 minute' WHERE id = %s", (ids[0],))
    rescued, second, third = claim_batch(conn, "rescuer:2:0", 3, 30)
    assert [rescued.id, second.id, third.id] == ids[:3]
    with conn.transaction():  # one now(): both sent exactly 2 s after they were queued
        conn.execute("UPDATE email_jobs SET created_at = now() - interval '2 seconds'"
                     " WHERE id = ANY(%s)", (ids[:2],))
        assert record_outcomes(conn, [Outcome(rescued, "sent"), Outcome(second, "sent"),
                                      Outcome(third, "failed")]) == [True] * 3
    conn.execute("UPDATE email_jobs SET created_at = now() - interval '90 seconds' WHERE id = %s",
                 (ids[3],))
    client.get("/healthz")

    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    body = response.get_data(as_text=True)
    healthz = 'authsvc_http_requests_total{method="GET",route="/healthz",status="200"}'
    assert _value(body, healthz) == 1
    assert _value(body, 'authsvc_outbox_jobs{status="pending"}') == 2
    assert _value(body, 'authsvc_outbox_jobs{status="sent"}') == 2
    assert _value(body, "authsvc_outbox_depth") == 2
    assert 89 <= _value(body, "authsvc_outbox_oldest_pending_age_seconds") < 300
    assert _value(body, "authsvc_email_sends_total") == 2
    assert _value(body, "authsvc_email_failures_total") == 1
    assert _value(body, "authsvc_outbox_lease_expiries_total") == 1
    assert _value(body, 'authsvc_email_send_latency_seconds_bucket{le="1"}') == 0
    assert _value(body, 'authsvc_email_send_latency_seconds_bucket{le="2.5"}') == 2
    assert _value(body, "authsvc_email_send_latency_seconds_count") == 2
    assert _value(body, "authsvc_email_send_latency_seconds_sum") == 4
    assert _value(body, "authsvc_database_up") == 1


def test_a_database_error_is_logged_and_reported_as_down(client, monkeypatch, caplog):
    from authsvc.outbox import admin

    def unreachable(*_args: object) -> None:
        raise psycopg.OperationalError("connection refused")

    monkeypatch.setattr(admin, "outbox_figures", unreachable)
    client.get("/healthz")
    with caplog.at_level(logging.WARNING, logger="authsvc.observability.metrics"):
        response = client.get("/metrics")
    assert response.status_code == 200
    body = response.get_data(as_text=True)
    assert _value(body, "authsvc_database_up") == 0
    assert _value(body, 'authsvc_http_requests_total{method="GET",route="/healthz",status="200"}')
    assert "authsvc_outbox_jobs" not in body and "authsvc_email_sends_total" not in body
    [logged] = [r for r in caplog.records if r.getMessage() == "metrics_database_error"]
    assert logged.__dict__["error"] == "connection refused"
