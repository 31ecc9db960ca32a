"""The null:// mail URL (issue 11): messages are built and discarded; refused in production."""

from __future__ import annotations

import json
import subprocess

import pytest

from authsvc.cli.worker import smtp_mailer_factory
from authsvc.config import ConfigError, load_settings
from authsvc.worker.mailers import NullMailer
from testkit.waiting import wait_until
from tests.worker_support import (
    authsvc_command,
    events,
    queue_notices,
    start_worker_process,
    stop_process,
)


def test_null_url_selects_the_discarding_mailer(env):
    settings = load_settings(env, AUTHSVC_SMTP_URL="null://")
    assert settings.null_mail and settings.smtp is None
    assert isinstance(smtp_mailer_factory(settings)(1.0), NullMailer)


def test_null_url_is_refused_in_production(env):
    with pytest.raises(ConfigError) as caught:
        load_settings(env, AUTHSVC_ENV="production", AUTHSVC_SMTP_URL="null://",
                      AUTHSVC_BASE_URL="https://auth.example.com")
    assert any("null://" in p and "production" in p for p in caught.value.problems)


@pytest.mark.e2e
def test_worker_with_null_url_builds_records_and_sends_nothing(conn, env, tmp_path):
    job_ids = queue_notices(conn, 5)
    done = subprocess.run(
        [*authsvc_command(), "worker", "--once"], env={**env, "AUTHSVC_SMTP_URL": "null://"},
        capture_output=True, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert conn.execute("SELECT count(*) FROM email_jobs WHERE status = 'sent'").fetchone() == (5,)
    assert [e[0] for e in events(conn, job_ids[0])] == ["claimed", "sent"]


@pytest.mark.e2e
def test_processes_runs_that_many_workers_and_sigterm_stops_them_all(conn, env, tmp_path):
    """`--processes 2`: two workers with their own lease owners; SIGTERM to the parent ends all."""
    queue_notices(conn, 200)
    log = tmp_path / "worker.log"
    parent = start_worker_process({**env, "AUTHSVC_SMTP_URL": "null://"}, log,
                                  "--processes", "2", "--poll-seconds", "0.2")
    try:
        def started() -> list[dict]:
            lines = [json.loads(line) for line in log.read_text().splitlines()
                     if line.startswith("{")]
            return [e for e in lines if e.get("event") == "worker_started"
                    or e.get("message") == "worker_started"]

        owners = wait_until(lambda: started() if len(started()) == 2 else [], 30, "two workers")
        assert len({e["lease_owner"] for e in owners}) == 2
        wait_until(lambda: conn.execute(
            "SELECT count(*) FROM email_jobs WHERE status = 'sent'").fetchone() == (200,),
            30, "the jobs sent")
    finally:
        assert stop_process(parent) == 0
    assert b"Traceback" not in log.read_bytes()


@pytest.mark.e2e
@pytest.mark.parametrize("level, lines", [("info", ["claimed", "sent"]), ("WARNING", [])])
def test_the_log_level_decides_which_lines_the_worker_writes(conn, env, level, lines):
    job_ids = queue_notices(conn, 1)
    done = subprocess.run(
        [*authsvc_command(), "worker", "--once"],
        env={**env, "AUTHSVC_SMTP_URL": "null://", "AUTHSVC_LOG_LEVEL": level},
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stderr
    written = [json.loads(line) for line in done.stderr.splitlines()]
    assert [e["event"] for e in written if e.get("job_id") == job_ids[0]] == lines
    assert [e[0] for e in events(conn, job_ids[0])] == ["claimed", "sent"]


def test_an_unknown_log_level_is_refused_at_start_up(env):
    with pytest.raises(ConfigError) as caught:
        load_settings(env, AUTHSVC_LOG_LEVEL="verbose")
    assert caught.value.problems == [
        "AUTHSVC_LOG_LEVEL: expected one of debug, info, warning, error, got 'verbose'"]
