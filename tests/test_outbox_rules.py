"""The outbox's one due rule: the claim, `authsvc outbox stats` and /metrics agree.

A worker that dies mid-send leaves its row pending under an expired lease.
The claim takes such a row again; an operator's stats and the Prometheus
gauges must count it as due too, or a stuck outbox looks empty.
"""

from __future__ import annotations

import json
import re

import psycopg
import pytest
from click.testing import CliRunner

from authsvc.cli import main
from authsvc.worker.jobs import Q as JOB_QUERIES
from authsvc.worker.jobs import claim_batch
from tests.worker_support import queue_notices


def _cli_stats(env: dict[str, str]) -> dict[str, float]:
    result = CliRunner().invoke(main, ["outbox", "stats"], env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return {name: float(value) for name, value in map(str.split, result.output.splitlines())}


def _metrics(client) -> dict[str, float]:
    body = client.get("/metrics").get_data(as_text=True)
    return {
        name: float(value)
        for name, value in re.findall(r"^(authsvc_outbox_[^ ]+) (\S+)$", body, re.MULTILINE)
    }


def _die_mid_send(conn: psycopg.Connection, job_id: int) -> None:
    """What a claim leaves behind when its worker is killed: a lease that ran out."""
    conn.execute(
        "UPDATE email_jobs SET lease_owner = 'dead-host:4242:0badf00d', attempt_count = 1,"
        " lease_expires_at = now() - interval '1 minute',"
        " next_attempt_at = now() - interval '1 minute' WHERE id = %s",
        (job_id,),
    )


def test_a_dead_workers_expired_lease_is_due_in_stats_and_metrics(conn, env, client):
    (job_id,) = queue_notices(conn, 1)
    _die_mid_send(conn, job_id)

    stats, gauges = _cli_stats(env), _metrics(client)

    assert (stats["due"], stats["leased"]) == (1, 0)
    assert (gauges["authsvc_outbox_depth"], gauges["authsvc_outbox_leased"]) == (1, 0)
    # ...and due means what the claim does: it takes the row over.
    assert [job.id for job in claim_batch(conn, "rescuer", 10, 30)] == [job_id]


def test_stats_metrics_and_the_claim_count_the_same_jobs_in_every_state(conn, env, client):
    fresh, dead, live, backoff, sent, failed = queue_notices(conn, 6)
    _die_mid_send(conn, dead)
    conn.execute(
        "UPDATE email_jobs SET lease_owner = 'alive:1:cafe', lease_expires_at = now() + interval"
        " '5 minutes', next_attempt_at = now() + interval '5 minutes' WHERE id = %s", (live,)
    )
    conn.execute("UPDATE email_jobs SET next_attempt_at = now() + interval '1 hour',"
                 " attempt_count = 1 WHERE id = %s", (backoff,))
    conn.execute("UPDATE email_jobs SET status = 'sent', sent_at = now() WHERE id = %s", (sent,))
    conn.execute("UPDATE email_jobs SET status = 'failed' WHERE id = %s", (failed,))

    stats, gauges = _cli_stats(env), _metrics(client)

    assert stats["due"] == gauges["authsvc_outbox_depth"] == 2
    assert stats["leased"] == gauges["authsvc_outbox_leased"] == 1
    for status in ("pending", "sent", "failed"):
        assert stats[status] == gauges[f'authsvc_outbox_jobs{{status="{status}"}}']
    assert stats["pending"] == 4
    claimed = {job.id for job in claim_batch(conn, "probe", 100, 30)}
    assert claimed == {fresh, dead}


def test_the_claim_still_walks_the_partial_index_through_the_due_function(conn):
    """The due rule is a SQL function; inlined, the claim keeps its index scan."""
    queue_notices(conn, 50)
    conn.execute("ANALYZE email_jobs")
    with conn.transaction(force_rollback=True):
        # With sequential scans priced out, only an index whose predicate the
        # planner can prove from the inlined rule can serve the scan.
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL enable_bitmapscan = off")
        row = conn.execute(
            "EXPLAIN (FORMAT JSON) " + JOB_QUERIES["claim_batch"],
            {"owner": "explain", "batch": 10, "lease_seconds": 30},
        ).fetchone()
    assert row is not None
    plan = json.dumps(row[0])
    assert '"Index Name": "email_jobs_due"' in plan, plan


@pytest.mark.parametrize("rule", ["outbox_job_due", "outbox_job_leased"])
def test_the_rules_are_defined_once_in_the_schema(conn, rule):
    count = conn.execute("SELECT count(*) FROM pg_proc WHERE proname = %s", (rule,)).fetchone()
    assert count == (1,)
