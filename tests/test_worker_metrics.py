"""GET /metrics: what a Prometheus scrape of the service reports."""

from __future__ import annotations

import re

from tests.worker_support import queue_notices


def _value(body: str, series: str) -> float:
    match = re.search(rf"^{re.escape(series)} (\S+)$", body, re.MULTILINE)
    assert match, f"{series} missing from /metrics"
    return float(match.group(1))


def test_metrics_report_requests_and_outbox_state_from_the_database(client, conn):
    ids = queue_notices(conn, 5)
    # The first job's first worker died mid-send; a second one took its lease over.
    conn.execute("UPDATE email_jobs SET lease_owner = 'dead:1:0', attempt_count = 1,"
                 " lease_expires_at = now() - interval '1 minute' WHERE id = %s", (ids[0],))
    conn.execute("UPDATE email_jobs SET lease_owner = 'rescuer:2:0', attempt_count = 2"
                 " WHERE id = %s", (ids[0],))
    conn.execute(
        "UPDATE email_jobs SET status = 'sent', sent_at = created_at + interval '2 seconds'"
        " WHERE id = ANY(%s)", (ids[:2],)
    )
    conn.execute("UPDATE email_jobs SET status = 'failed' WHERE id = %s", (ids[2],))
    conn.execute("UPDATE email_jobs SET created_at = now() - interval '90 seconds' WHERE id = %s",
                 (ids[3],))
    conn.execute(
        "INSERT INTO email_job_events (job_id, event, attempt) VALUES"
        " (%(a)s, 'claimed', 1), (%(a)s, 'claimed', 2), (%(a)s, 'sent', 2),"
        " (%(b)s, 'claimed', 1), (%(b)s, 'sent', 1), (%(c)s, 'claimed', 1), (%(c)s, 'failed', 1)",
        {"a": ids[0], "b": ids[1], "c": ids[2]},
    )
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
