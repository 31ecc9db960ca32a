"""After a database restart the web app loses one request per process, not one per connection.

The web pool does not test a connection at every checkout (a round trip per
request); instead the first request that finds its connection dead checks
the whole pool (authsvc.web.database_failed), so every later request gets a
working connection.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from authsvc.accounts.passwords import cheap_passwords
from authsvc.config import load_settings
from authsvc.db.migrate import upgrade
from authsvc.web.app import create_app
from authsvc.web.plumbing import POOL_RECOVERY
from testkit.postgres import pg_ctl, throwaway_postgres
from testkit.waiting import wait_until
from tests.api_support import ApiCaller, register_shop_app

pytestmark = pytest.mark.e2e  # a PostgreSQL server of its own, restarted


def test_a_restart_costs_one_failed_request_then_every_call_succeeds(env, tmp_path_factory):
    server = throwaway_postgres(tmp_path_factory.mktemp("pgw"))
    try:
        url = server.get_uri()
        upgrade(url)
        settings = load_settings({**env, "AUTHSVC_DATABASE_URL": url,
                                  "AUTHSVC_DIRECT_DATABASE_URL": url})
        app = create_app(settings, passwords=cheap_passwords())  # its own pool, as served
        pool = app.extensions["authsvc"].pool
        with pool.connection() as conn:
            shop, key = register_shop_app(conn)
        api = ApiCaller(app.test_client(), shop, key)

        # Several requests at once, so the pool holds several connections.
        barrier = threading.Barrier(4)

        def call(n: int) -> None:
            barrier.wait()
            assert api.post("/password-resets", {"email": f"a{n}@example.com"}).status_code == 202

        threads = [threading.Thread(target=call, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert pool.get_stats()["pool_size"] >= 2

        pg_ctl(server, "-w", "-m", "fast", "restart")  # every pooled connection is now dead

        recovery = app.extensions[POOL_RECOVERY]

        def calls(make_call: Callable[[int], int], count: int) -> list[int]:
            statuses = []
            for n in range(count):
                statuses.append(make_call(n))
                # The check runs beside the request that failed; a client
                # retrying after Retry-After finds it long done.
                wait_until(lambda: not recovery.checking, 10, "the pool check")
            return statuses

        resets = calls(lambda n: api.post(
            "/password-resets", {"email": f"b{n}@example.com"}).status_code, 8)
        assert resets.count(503) <= 1 and resets[1:] == [202] * 7, resets

        # The readiness probe and a scrape recover the same way.
        pg_ctl(server, "-w", "-m", "fast", "restart")
        client = app.test_client()
        probes = calls(lambda _n: client.get("/readyz").status_code, 4)
        assert probes[1:] == [200] * 3, probes
        pg_ctl(server, "-w", "-m", "fast", "restart")
        ups = calls(lambda _n: int("authsvc_database_up 1.0" in client.get("/metrics").text), 4)
        assert ups[1:] == [1] * 3, ups
        pool.close()
    finally:
        server.cleanup()
