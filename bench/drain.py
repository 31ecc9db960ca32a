"""Drain rates of authsvc's worker: mechanics (in-process, no-op mail) and the full pipeline.

Rates are read from the audit trail (first claim to last record), so process
start-up is not counted for anyone.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from authsvc.apps import brands, keys
from authsvc.emails import app_templates
from authsvc.observability.logs import configure_logging
from authsvc.worker.jobs import ClaimedJob
from authsvc.worker.loop import Worker, WorkerOptions
from authsvc.worker.mailers import OutgoingEmail
from bench.common import authsvc_script, worker_env

_DATA = b"Subject: x\r\n\r\nx\r\n"


class _DayLongLinks:
    """What the worker's housekeeping asks of the codec: the longest link lifetime."""

    def longest_code_ttl(self) -> timedelta:
        return timedelta(days=1)


class _StubRenderer:
    """Mechanics: no template, no link, no MIME; one fixed message."""

    codec = _DayLongLinks()

    def link_expires_at(self, _job: ClaimedJob) -> datetime | None:
        return None

    def render(self, job: ClaimedJob) -> OutgoingEmail:
        return OutgoingEmail(job.id, job.public_id, "a@b", job.recipient,
                             f"<authsvc-job-{job.public_id}@b>", _DATA)


class _NoopMailer:
    def send(self, email: OutgoingEmail) -> str:
        return email.message_id

    def close(self) -> None:
        pass


def queue_links(url: str, jobs: int, *, queued: bool = True) -> None:
    """`jobs` accounts r1…rN and, if `queued`, a link email for each: reset links for
    confirmed accounts and verify links for unconfirmed ones, half each, as production
    drains them (each claim checks its account's current version)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO users (email, password_hash, email_verified_at)"
            " SELECT 'r' || n || '@example.com', 'x', CASE WHEN n %% 2 = 0 THEN now() END"
            " FROM generate_series(1, %s) n", (jobs,),
        )
        if queued:
            conn.execute(
                "INSERT INTO email_jobs (template, recipient, user_id, purpose, token_version,"
                " issued_at)"
                " SELECT p, email, id, p, CASE p WHEN 'reset' THEN reset_version"
                "   ELSE verify_version END, now()"
                " FROM (SELECT *, CASE WHEN email_verified_at IS NULL THEN 'verify'"
                "   ELSE 'reset' END AS p FROM users) AS u"
            )
        conn.execute("VACUUM ANALYZE")


# The languages-and-brands row: an app's own accounts, its brand, German, its own
# template (text and `{{ name }}` holes: the common shape) for both kinds.
BRANDED_TEXT = ("Hallo,\n\n{{ product_name }}: {{ link }}\n\nCode: {{ code }}"
                " ({{ expires_in }}, {{ expires_at }})\n")
BRANDED_HTML = ('<p>Hallo,</p><p><a href="{{ link }}" style="background: {{ brand_color }}">'
                "{{ product_name }}</a></p><p>Code: <b>{{ code }}</b> ({{ expires_in }},"
                " {{ expires_at }})</p>")


def brand_jobs(url: str, *, half: bool = False) -> None:
    """Make every queued link job (`half`: every other pair, both kinds) an app's own
    account's email, asked in German, with the app's brand and its template for both kinds
    (`authsvc worker` then takes that path)."""
    with psycopg.connect(url, autocommit=True) as conn:
        app, _key = keys.register_app(conn, "Bench Shop", [])
        changes = {"product_name": "Bench Shop", "logo_url": "https://shop.example/logo.png",
                   "brand_color": "#aa3300", "support_url": "https://shop.example/help",
                   "default_locale": "de"}
        brands.update_brand(conn, app.id, changes)
        for kind in ("verify", "reset"):
            app_templates.put_template(conn, app.id, kind, "de", subject="{{ product_name }}",
                                       text=BRANDED_TEXT, html=BRANDED_HTML)
        mark = {"own_account": True, "locale": "de", "app_name": "Bench Shop"}
        conn.execute("UPDATE email_jobs SET app_id = %s, payload = payload || %s"
                     " WHERE NOT %s OR id %% 4 < 2", (app.id, Jsonb(mark), half))


def trail_rate(url: str, jobs: int) -> float:
    """Jobs/s from the first claim to the last recorded outcome; all must be sent."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE status = 'sent') FROM email_jobs").fetchone()
        assert row is not None and row[0] == jobs, f"{row} of {jobs} sent"
        span = conn.execute(
            "SELECT extract(epoch FROM max(created_at) FILTER (WHERE event = 'sent')"
            " - min(created_at) FILTER (WHERE event = 'claimed')) FROM email_job_events"
        ).fetchone()
    assert span is not None
    return jobs / max(float(span[0]), 1e-6)


def _mechanics_process(url: str, options: dict[str, Any], log: str | None) -> None:
    # The connection options `authsvc worker` gets here (the URL is the
    # direct one: authsvc.db.is_direct), without its LISTEN: --once drains.
    if log is not None:  # logging as `authsvc worker` configures it, stderr to a file
        os.dup2(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND), 2)
        configure_logging("INFO")
    Worker(url, _StubRenderer(), lambda _t: _NoopMailer(),  # type: ignore[arg-type]
           WorkerOptions(once=True, **options), listen_url=url).run()


def mechanics_drain(url: str, jobs: int, *, concurrency: int, batch: int,
                    processes: int = 1, logs: bool = True) -> float:
    """authsvc's real Worker (claims, completer, trail) over link jobs, with no rendering and
    a no-op mailer; `logs`: every claim and outcome logged to a file, as deployed."""
    queue_links(url, jobs)
    options = {"concurrency": concurrency, "batch": batch}
    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as logs_dir:
        children = [
            context.Process(target=_mechanics_process, args=(
                url, options, str(Path(logs_dir, f"{i}.log")) if logs else None))
            for i in range(processes)]
        for child in children:
            child.start()
        for child in children:
            child.join(600)
            assert child.exitcode == 0, child.exitcode
        if logs:
            lines = sum(len(p.read_bytes().splitlines()) for p in Path(logs_dir).iterdir())
            assert lines >= 2 * jobs, f"{lines} log lines for {jobs} jobs"
    return trail_rate(url, jobs)


def pipeline_drain(url: str, jobs: int, *, concurrency: int, batch: int,
                   processes: int = 1, logs: bool = True, branded: bool = False) -> float:
    """`authsvc worker --once` to null:// over link jobs: claim, mint, render, build MIME,
    discard, record; `logs`: its JSON lines to a file, as deployed (else
    AUTHSVC_LOG_LEVEL=warning); `branded`: every job an app's own account's, in German,
    from the app's template, in its brand (brand_jobs)."""
    queue_links(url, jobs)
    if branded:
        brand_jobs(url)
    with tempfile.TemporaryDirectory() as data:
        env = worker_env(url, "null://", data)
        if not logs:
            env["AUTHSVC_LOG_LEVEL"] = "warning"
        with Path(data, "worker.log").open("w") as stderr:
            subprocess.run(
                [authsvc_script(), "worker", "--once", "--processes", str(processes),
                 "--concurrency", str(concurrency), "--batch", str(batch)],
                env=env, stderr=stderr, check=True, timeout=600,
            )
    return trail_rate(url, jobs)
