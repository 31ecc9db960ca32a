"""Expiring state is pruned by the worker's housekeeping, not kept forever."""

from __future__ import annotations

from authsvc.app_keys import register_app
from testkit.waiting import wait_until
from tests.worker_support import running, worker


def test_worker_prunes_expired_idempotency_keys_and_rate_limit_windows(
    conn, database_url, settings
):
    app, _key = register_app(conn, "shop", ["https://shop.example.com/"])
    conn.execute(
        "INSERT INTO idempotency_keys (app_id, key, fingerprint, status_code, response_body,"
        " created_at) VALUES (%s, 'old', '\\x00', 202, '{}', now() - interval '25 hours'),"
        " (%s, 'fresh', '\\x00', 202, '{}', now() - interval '1 hour')",
        (app.id, app.id),
    )
    conn.execute(
        "INSERT INTO rate_limit_counters (bucket, window_start, hits) VALUES"
        " ('email:old', now() - interval '2 days', 3), ('email:new', now(), 1)"
    )

    def keys() -> list[str]:
        return [r[0] for r in conn.execute("SELECT key FROM idempotency_keys ORDER BY key")]

    def buckets() -> list[str]:
        return [r[0] for r in conn.execute("SELECT bucket FROM rate_limit_counters")]

    with running(worker(database_url, settings, "smtp://127.0.0.1:9", poll_seconds=0.2)):
        wait_until(lambda: keys() == ["fresh"], what="the expired key to be pruned")
        wait_until(lambda: buckets() == ["email:new"], what="the old window to be pruned")
