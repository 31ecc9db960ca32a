"""Behind a transaction pooler (SPEC §11): nothing on the pooled URL depends on session state.

Each test puts Debian's PgBouncer in transaction mode in front of the test
server (or uses the one `make test-pgbouncer` already put there) and drives
the part that used to break: psycopg's automatic server-side prepared
statements (`_pg3_0` already exists / does not exist), the migration lock
taken with a session lock and released on another server connection, and a
LISTEN that hears nothing through the pooler.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from authsvc.config import load_settings
from authsvc.db.connections import connect, create_pool, resolve_listen_url
from authsvc.db.migrate import available_migrations, upgrade
from chaos.servers import PgBouncer
from testkit.smtp_double import SmtpDouble
from testkit.waiting import wait_until
from tests.pg import TestDatabases, with_database
from tests.race_support import advisory_locks, run_in_threads
from tests.worker_support import message_id_of, queue_notices, running, worker

pytestmark = pytest.mark.e2e  # every test here runs PgBouncer (a process)


@pytest.fixture
def pooled_server(test_databases: TestDatabases) -> Iterator[str]:
    """A server URL (maintenance database) through PgBouncer in transaction mode."""
    if test_databases.pooled:
        yield test_databases.server_url
        return
    if shutil.which("pgbouncer") is None and not os.path.exists("/usr/sbin/pgbouncer"):
        pytest.skip("pgbouncer is not installed (make test-pgbouncer installs Debian's)")
    params = conninfo_to_dict(test_databases.direct_url)
    bouncer = PgBouncer(str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432))
    try:
        yield bouncer.url()
    finally:
        bouncer.close()


@pytest.fixture
def pooled_url(pooled_server: str, database_url: str) -> str:
    """This test's database, through the pooler."""
    return with_database(pooled_server, urlsplit(database_url).path.lstrip("/"))


@pytest.fixture
def smtp() -> Iterator[SmtpDouble]:
    with SmtpDouble() as double:
        yield double


def test_worker_through_a_transaction_pooler_sends_every_job(pooled_url, conn, settings, smtp):
    """The operator's report: through PgBouncer the worker died on `_pg3_0` after one email."""
    job_ids = queue_notices(conn, 120)
    w = worker(pooled_url, settings, smtp.url, concurrency=4, batch=5, once=True, listen_url=None)
    w.run()  # raised InvalidSqlStatementName / DuplicatePreparedStatement before the fix

    assert w.failure is None
    assert {m.message_id for m in smtp.messages} == {
        message_id_of(conn, i) for i in job_ids
    }
    assert conn.execute("SELECT status, count(*) FROM email_jobs GROUP BY status").fetchall() == [
        ("sent", 120)
    ]


def test_a_worker_listening_on_the_server_still_never_prepares_on_the_pooler(
        pooled_url, direct_database_url, conn, settings, smtp):
    """The production layout: the pool on the pooler, LISTEN on the server (the direct one)."""
    job_ids = queue_notices(conn, 60)
    w = worker(pooled_url, settings, smtp.url, concurrency=4, batch=5, once=True,
               listen_url=direct_database_url)
    w.run()
    assert w.failure is None
    assert len({m.message_id for m in smtp.messages}) == len(job_ids)


def test_pool_runs_repeated_queries_on_many_server_connections(pooled_url):
    """A query run more than five times is never prepared on the server."""
    pool = create_pool(pooled_url, min_size=4, max_size=8)
    errors: list[BaseException] = []

    def hammer() -> None:
        try:
            for _ in range(40):
                with pool.connection() as c:
                    c.execute("SELECT count(*) FROM email_jobs WHERE status = %s", ("pending",))
        except psycopg.Error as exc:
            errors.append(exc)

    try:
        run_in_threads(hammer, 8)
    finally:
        pool.close()
    assert errors == []


def test_concurrent_migrations_through_the_pooler_leave_no_lock_behind(
    pooled_server, test_databases
):
    """Two `db upgrade`s at once through the pooler: one applies, none leaks an advisory lock."""
    name = "authsvc_mig_pooled"
    with psycopg.connect(test_databases.direct_url, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(name)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    pooled = with_database(pooled_server, name)
    results: list[object] = []

    def run() -> None:
        try:
            results.append(len(upgrade(pooled)))
        except BaseException as exc:
            results.append(exc)

    try:
        run_in_threads(run, 2)  # fails if an upgrade hung on the lock
        # Each migration takes the lock on its own, so the two may share the work:
        # together they applied every migration exactly once, and neither failed.
        assert all(isinstance(n, int) for n in results), results
        assert sum(results) == len(available_migrations())  # type: ignore[arg-type]
        with connect(test_databases.direct(pooled)) as direct:
            held = advisory_locks(direct)
            applied = direct.execute("SELECT count(*) FROM schema_migrations").fetchone()
        assert held == 0, "a session advisory lock outlived the upgrade on a server connection"
        assert applied == (len(available_migrations()),)
        # A third run through the pooler does not wait for a leaked lock.
        assert upgrade(pooled) == []
    finally:
        test_databases.drop(pooled)


def test_worker_without_a_direct_url_polls_instead_of_listening(
    pooled_url, conn, settings, smtp, caplog
):
    """LISTEN through a pooler hears nothing: with no direct URL the worker polls, says so once."""
    caplog.set_level(logging.INFO, logger="authsvc.worker.loop")
    w = worker(pooled_url, settings, smtp.url, poll_seconds=600, listen_url=None)
    with running(w):
        wait_until(lambda: any(r.msg == "worker_started" for r in caplog.records),
                   what="worker started")
        queue_notices(conn, 1)
        smtp.wait_for(1, timeout=15)  # a LISTEN on the pooled URL would sleep for 600 s
    said = [r for r in caplog.records if r.msg == "listen_unavailable"]
    assert len(said) == 1 and said[0].poll_seconds == 1.0


def test_listen_url_is_the_direct_url_never_the_pooled_one(env):
    pooled_only = {k: v for k, v in env.items() if k != "AUTHSVC_DIRECT_DATABASE_URL"}
    assert resolve_listen_url(load_settings(pooled_only)) is None
    direct = env["AUTHSVC_DIRECT_DATABASE_URL"]
    assert resolve_listen_url(load_settings(env)) == direct


@pytest.mark.parametrize(
    ("direct", "pooled", "problem"),
    [
        ("mysql://db/authsvc", "postgresql://pooler/authsvc", "must be a postgresql://"),
        ("postgresql://[::1", "postgresql://pooler/authsvc", "must be a postgresql://"),
        ("postgresql://db/authsvc", None, "set AUTHSVC_DATABASE_URL too"),
    ],
)
def test_a_bad_direct_url_is_refused_at_start(env, direct, pooled, problem):
    from authsvc.config import ConfigError

    bad = {**env, "AUTHSVC_DIRECT_DATABASE_URL": direct}
    if pooled is None:
        bad.pop("AUTHSVC_DATABASE_URL")
    else:
        bad["AUTHSVC_DATABASE_URL"] = pooled
    with pytest.raises(ConfigError) as refused:
        load_settings(bad)
    assert any(p.startswith("AUTHSVC_DIRECT_DATABASE_URL") and problem in p
               for p in refused.value.problems)


@pytest.mark.e2e
def test_make_run_with_pooled_and_direct_urls_delivers_every_email(
    pooled_url, direct_database_url, env, tmp_path
):
    """`authsvc dev` (`make run`) on PgBouncer and the direct URL: 30 signups, 30 emails."""
    import json
    import urllib.request

    from tests.test_dev import running_dev

    dev_env = {**env, "AUTHSVC_DATABASE_URL": pooled_url,
               "AUTHSVC_DIRECT_DATABASE_URL": direct_database_url}
    dev_env.pop("AUTHSVC_BASE_URL")

    def call(url: str, body: dict | None = None, headers: dict | None = None) -> dict:
        """POST `body` as JSON; the answer's JSON."""
        request = urllib.request.Request(  # noqa: S310 (loopback)
            url, data=json.dumps(body or {}).encode(), method="POST",
            headers={"Content-Type": "application/json", **(headers or {})},
        )
        with urllib.request.urlopen(request, timeout=30) as reply:  # noqa: S310 (loopback)
            text = reply.read().decode()
        return json.loads(text) if text else {}

    with running_dev(tmp_path, dev_env) as dev:
        key = (dev.data_dir / "dev-app-key").read_text().strip()
        scope = call(f"{dev.url}/_inbox/scopes")["scope"]
        for n in range(30):
            call(f"{dev.url}/api/v1/signups",
                 {"email": f"u{n}+{scope}@inbox.test", "password": f"correct horse battery {n}"},
                 {"Authorization": f"Bearer {key}"})
        with urllib.request.urlopen(  # noqa: S310 (loopback)
            f"{dev.url}/_inbox/scopes/{scope}/messages?wait=30&min=30", timeout=40
        ) as reply:
            listed = json.loads(reply.read())
        assert len(listed["messages"]) == 30
        printed = dev.printed()
        assert dev.process.poll() is None, printed[-3000:]
    assert "prepared statement" not in printed
    assert "listen_unavailable" not in printed  # the direct URL was used for LISTEN
