"""A failover (SPEC §11): the primary crashes, the standby is promoted, nothing stays broken.

Each test builds its own primary and synchronous streaming standby
(chaos/failover.py: initdb, pg_basebackup -R, pg_ctl promote from pgserver's
binaries) and one libpq URL naming both with target_session_attrs=read-write.
`make chaos-failover` runs the same fault under the full chaos load.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from authsvc.config import load_settings
from authsvc.db.connections import connect, create_pool
from authsvc.web.app import create_app
from chaos.failover import FailoverPair
from testkit.smtp_double import SmtpDouble
from testkit.waiting import wait_until
from tests.api_support import ApiCaller, assert_problem, register_shop_app
from tests.worker_support import queue_notices, running, worker

pytestmark = pytest.mark.e2e


@pytest.fixture
def pair() -> Iterator[FailoverPair]:
    servers = FailoverPair()
    try:
        yield servers
    finally:
        servers.close()


def test_web_answers_503_with_retry_after_during_the_gap_then_recovers(pair, env, passwords):
    settings = load_settings({**env, "AUTHSVC_DATABASE_URL": pair.url,
                              "AUTHSVC_DIRECT_DATABASE_URL": pair.url})
    pool = create_pool(pair.url, min_size=2, max_size=4)
    try:
        with connect(pair.url) as conn:
            shop, key = register_shop_app(conn)
        app = create_app(settings, pool=pool, passwords=passwords)
        api = ApiCaller(app.test_client(), shop, key)
        assert api.post("/password-resets", {"email": "ann@example.com"}).status_code == 202

        pool.timeout = 2.0
        pair.primary.stop("immediate")  # the gap: no primary until the promotion
        gap = api.post("/password-resets", {"email": "ann@example.com"}, idempotency_key="g1")
        assert_problem(gap, 503, "service_unavailable")
        assert gap.headers["Retry-After"] == "2"

        pair.standby.promote()
        pair.failovers += 1
        # The pool dropped the dead connections; new ones find the new primary.
        after = wait_until(
            lambda: api.post("/password-resets", {"email": "bob@example.com"},
                             idempotency_key="after").status_code == 202 or None,
            timeout=30, what="a 202 from the promoted standby",
        )
        assert after
        with connect(pair.url) as conn:
            assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)
    finally:
        pool.close()


def test_worker_re_listens_on_the_new_primary_and_rechecks_the_queue(pair, env, caplog):
    """Polling only every 600 s: a job queued after the failover arrives through the new LISTEN."""
    caplog.set_level(logging.INFO, logger="authsvc.worker.loop")
    settings = load_settings({**env, "AUTHSVC_DATABASE_URL": pair.url,
                              "AUTHSVC_DIRECT_DATABASE_URL": pair.url})
    with SmtpDouble() as smtp:
        w = worker(pair.url, settings, smtp.url, poll_seconds=600, lease_seconds=5)
        with running(w):
            with connect(pair.url) as conn:
                queue_notices(conn, 1, "before")
                conn.execute("SELECT pg_notify('authsvc_outbox', '')")
            smtp.wait_for(1, timeout=15)
            pair.restart()  # crash the primary, promote the standby
            wait_until(lambda: any(r.msg == "listener_disconnected" for r in caplog.records),
                       timeout=20, what="the listener noticing the crash")
            relistened = len([r for r in caplog.records if r.msg == "listener_disconnected"])
            with connect(pair.url) as conn:
                queue_notices(conn, 1, "after")
                conn.execute("SELECT pg_notify('authsvc_outbox', '')")
            smtp.wait_for(2, timeout=30)
        assert relistened >= 1
        assert len({m.message_id for m in smtp.messages}) == 2
