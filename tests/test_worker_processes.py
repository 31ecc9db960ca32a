"""The worker as users run it: `authsvc worker` processes, signals, a database restart."""

from __future__ import annotations

import json
import signal
import uuid
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest
from psycopg import sql

from authsvc.db.migrate import upgrade
from authsvc.outbox import NOTIFY_CHANNEL
from testkit.postgres import pg_ctl, throwaway_postgres
from testkit.smtp_double import SmtpDouble
from testkit.waiting import wait_until
from tests.worker_support import (
    events,
    expire_lease,
    job_status,
    message_id_of,
    public_id_of,
    queue_notices,
    start_worker_process,
    stop_process,
)

pytestmark = pytest.mark.e2e


def test_sigkill_after_smtp_accepted_resends_with_same_message_id(conn, env, tmp_path):
    """Done-when 6: the at-least-once window, with real processes."""
    [job_id] = queue_notices(conn, 1)
    with SmtpDouble(mode="stall_after_accept") as smtp:
        env = {**env, "AUTHSVC_SMTP_URL": smtp.url}
        first = start_worker_process(env, tmp_path / "first.log", "--poll-seconds", "0.2")
        try:
            smtp.wait_for(1, timeout=20)  # accepted; the worker now waits for the 250 reply
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(10)
        status, first_owner, _ = job_status(conn, job_id)
        assert status == "pending" and first_owner is not None, "killed before marking the job"
        expire_lease(conn, job_id)  # its lease ran out (the claim's rule is tested apart)

        smtp.mode = "accept"
        second = start_worker_process(env, tmp_path / "second.log", "--poll-seconds", "0.2")
        try:
            wait_until(lambda: job_status(conn, job_id)[0] == "sent", 20, "the re-send")
        finally:
            assert stop_process(second) == 0

    assert [m.message_id for m in smtp.messages] == [message_id_of(conn, job_id)] * 2
    trail = events(conn, job_id)
    assert [e[0] for e in trail] == ["claimed", "claimed", "sent"]
    assert trail[0][1] == first_owner and trail[1][1] != first_owner
    assert [e[2] for e in trail] == [1, 2, 2]


def test_sigterm_mid_batch_exits_0_and_leaves_nothing_leased(conn, env, tmp_path):
    """Done-when 7."""
    job_ids = queue_notices(conn, 12)
    with SmtpDouble(delay_seconds=0.3) as smtp:
        env = {**env, "AUTHSVC_SMTP_URL": smtp.url}
        process = start_worker_process(env, tmp_path / "worker.log", "--concurrency", "2",
                                       "--batch", "12", "--lease-seconds", "30")
        smtp.wait_for_attempts(1, timeout=20)
        leased = conn.execute(
            "SELECT count(*) FROM email_jobs WHERE lease_owner IS NOT NULL"
        ).fetchone()
        # More than the two senders hold: claimed jobs wait unsent when the stop comes
        # (12 at first; a busy machine may have finished a few pairs by now).
        assert leased[0] > 2, "the batch should be claimed while the first sends run"
        assert stop_process(process) == 0
        sent_before = len(smtp.messages)

        assert conn.execute(
            "SELECT count(*) FROM email_jobs WHERE lease_owner IS NOT NULL"
        ).fetchone() == (0,)
        statuses = dict(conn.execute("SELECT status, count(*) FROM email_jobs GROUP BY status"))
        assert statuses.get("sent", 0) == sent_before and 0 < sent_before < 12
        released = conn.execute(
            "SELECT count(*) FROM email_job_events WHERE event = 'released'"
        ).fetchone()
        assert released[0] == 12 - sent_before

        # Released jobs are due at once, with their attempt not counted.
        finisher = start_worker_process(env, tmp_path / "once.log", "--once")
        assert finisher.wait(30) == 0
    received = sorted(m.message_id for m in smtp.messages)
    assert received == sorted(message_id_of(conn, i) for i in job_ids)
    assert conn.execute("SELECT max(attempt_count) FROM email_jobs").fetchone() == (1,)


def _enqueue(url: str, prefix: str) -> int:
    with psycopg.connect(url, autocommit=True) as own:
        [job_id] = queue_notices(own, 1, prefix)
        own.execute("SELECT pg_notify(%s, '')", (NOTIFY_CHANNEL,))
    return job_id


def test_database_restart_under_running_worker(env, tmp_path_factory, tmp_path):
    """Done-when 8: a throwaway server of our own, restarted while a send is in flight."""
    server = throwaway_postgres(tmp_path_factory.mktemp("pgr"))
    try:
        url = server.get_uri()
        upgrade(url)
        with SmtpDouble(delay_seconds=1.5) as smtp:
            # Polling only every 60 s: the second job can only arrive through a
            # LISTEN connection that was re-established after the restart.
            env = {**env, "AUTHSVC_DATABASE_URL": url, "AUTHSVC_DIRECT_DATABASE_URL": url,
                   "AUTHSVC_SMTP_URL": smtp.url}
            log = tmp_path / "worker.log"
            process = start_worker_process(env, log, "--lease-seconds", "20",
                                           "--poll-seconds", "60")
            try:
                wait_until(lambda: b"worker_started" in log.read_bytes(), 20, "the worker")
                in_flight = _enqueue(url, "before")
                smtp.wait_for_attempts(1, timeout=10)
                pg_ctl(server, "-w", "-m", "fast", "restart")  # the send is still running
                smtp.wait_for(1, timeout=10)
                after = _enqueue(url, "after")
                smtp.wait_for(2, timeout=30)
                with psycopg.connect(url, autocommit=True) as conn:
                    both_sent = lambda: {job_status(conn, i)[0] for i in (in_flight, after)}  # noqa: E731
                    wait_until(lambda: both_sent() == {"sent"}, 30, "both jobs marked sent")
                    assert conn.execute("SELECT count(*) FROM email_jobs").fetchone() == (2,)
                assert process.poll() is None, "the worker died with the database"
            finally:
                assert stop_process(process) == 0
        assert len(smtp.messages) == 2, "nothing lost and nothing sent twice"
        logged = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
        assert any(e["event"] in {"listener_disconnected", "database_unavailable"} for e in logged)
    finally:
        # After a restart pgserver no longer recognises the postmaster as its
        # own, so stop it explicitly before letting pgserver delete the folder.
        pg_ctl(server, "-w", "-m", "immediate", "stop")
        server.cleanup()


def test_worker_started_while_the_database_is_down_waits_for_it(env, tmp_path_factory, tmp_path):
    """A worker (re)started during an outage waits instead of exiting into a restart loop."""
    server = throwaway_postgres(tmp_path_factory.mktemp("pgw"))
    try:
        url = server.get_uri()
        upgrade(url)
        job_id = _enqueue(url, "queued")
        pg_ctl(server, "-w", "-m", "fast", "stop")
        with SmtpDouble() as smtp:
            env = {**env, "AUTHSVC_DATABASE_URL": url, "AUTHSVC_DIRECT_DATABASE_URL": url,
                   "AUTHSVC_SMTP_URL": smtp.url}
            log = tmp_path / "worker.log"
            process = start_worker_process(env, log, "--poll-seconds", "0.2")
            try:
                wait_until(lambda: b"database_unavailable" in log.read_bytes(), 20, "a warning")
                assert process.poll() is None, "the worker gave up at once"
                socket_dir = parse_qs(urlsplit(url).query)["host"][0]
                pg_ctl(server, "-w", "start", "-o", f"-h '' -k {socket_dir}",
                        "-l", str(server.pgdata / "log"))
                smtp.wait_for(1, timeout=30)
                with psycopg.connect(url, autocommit=True) as conn:
                    wait_until(lambda: job_status(conn, job_id)[0] == "sent", 20, "the job sent")
            finally:
                assert stop_process(process) == 0
    finally:
        pg_ctl(server, "-w", "-m", "immediate", "stop")
        server.cleanup()


def test_outbox_commands_show_trail_redrive_and_prune(conn, env, tmp_path):
    from click.testing import CliRunner

    from authsvc.cli import main

    [job_id] = queue_notices(conn, 1)
    with SmtpDouble(mode="reject") as smtp:
        env = {**env, "AUTHSVC_SMTP_URL": smtp.url}
        runner = CliRunner()
        done = runner.invoke(main, ["worker", "--once"], env=env)
        assert done.exit_code == 0, done.output

        shown = runner.invoke(main, ["outbox", "show", str(job_id)], env=env)
        assert shown.exit_code == 0
        assert "status               failed" in shown.output
        assert "claimed" in shown.output and "550 5.1.1 no such user here" in shown.output

        listed = runner.invoke(main, ["outbox", "list", "--status", "failed"], env=env)
        assert listed.exit_code == 0 and "user1@example.com" in listed.output

        assert runner.invoke(main, ["outbox", "redrive", str(job_id)], env=env).exit_code == 0
        smtp.mode = "accept"
        assert runner.invoke(main, ["worker", "--once"], env=env).exit_code == 0
        assert len(smtp.messages) == 1 and job_status(conn, job_id)[0] == "sent"

        stats = runner.invoke(main, ["outbox", "stats"], env=env)
        assert "sent                   1" in stats.output

        again = runner.invoke(main, ["outbox", "redrive", str(job_id)], env=env)
        assert again.exit_code != 0 and "only failed jobs" in again.output

        missing = runner.invoke(main, ["outbox", "show", "999999"], env=env)
        assert missing.exit_code != 0 and "no outbox job 999999" in missing.output
        assert "Traceback" not in missing.output

        # The id an email shows (its Message-ID's) finds the same job.
        public_id = public_id_of(conn, job_id)
        by_public = runner.invoke(main, ["outbox", "show", public_id], env=env)
        assert by_public.exit_code == 0 and by_public.output == shown_now(runner, env, job_id)
        assert f"public_id            {public_id}" in by_public.output
        unknown = runner.invoke(main, ["outbox", "show", str(uuid.uuid4())], env=env)
        assert unknown.exit_code != 0 and "no outbox job" in unknown.output
        for nonsense in ("0", "12abc", "authsvc-job-x", "9" * 30, "9" * 5000):
            refused = runner.invoke(main, ["outbox", "redrive", nonsense], env=env)
            assert refused.exit_code == 2 and "neither a job id" in refused.output, nonsense
            assert "Traceback" not in refused.output

        bad = runner.invoke(main, ["outbox", "prune", "--older-than", "soon"], env=env)
        assert bad.exit_code == 2 and "duration" in bad.output

        kept = runner.invoke(main, ["outbox", "prune", "--older-than", "1d"], env=env)
        assert "deleted 0 job(s)" in kept.output
        conn.execute("UPDATE email_jobs SET created_at = now() - interval '2 days'")
        pruned = runner.invoke(main, ["outbox", "prune", "--older-than", "1d"], env=env)
        assert "deleted 1 job(s)" in pruned.output
        assert conn.execute("SELECT count(*) FROM email_job_events").fetchone() == (0,)


def test_worker_refuses_an_unmigrated_database_with_a_clear_message(env, test_databases):
    from click.testing import CliRunner

    from authsvc.cli import main
    from tests.pg import with_database

    name = f"authsvc_worker_empty_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(test_databases.server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        empty = with_database(test_databases.server_url, name)
        result = CliRunner().invoke(main, ["worker", "--once"],
                                    env={**env, "AUTHSVC_DATABASE_URL": empty})
        assert result.exit_code == 1
        assert "run `authsvc db upgrade`" in result.output and "Traceback" not in result.output
        bad = CliRunner().invoke(main, ["worker", "--concurrency", "0"], env=env)
        assert bad.exit_code == 2 and "--concurrency" in bad.output
    finally:
        with psycopg.connect(test_databases.server_url, autocommit=True) as admin:
            drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            admin.execute(drop.format(sql.Identifier(name)))


def shown_now(runner, env, job_id: int) -> str:
    from authsvc.cli import main

    return runner.invoke(main, ["outbox", "show", str(job_id)], env=env).output
