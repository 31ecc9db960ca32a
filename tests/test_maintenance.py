"""Expiring state is pruned, not kept forever.

The worker's housekeeping (authsvc/worker/loop.py, every PRUNE_EVERY_SECONDS) calls
these three functions with its clock; each is called here directly, with a
frozen clock, on one row past its lifetime and one within it.
"""

from __future__ import annotations

from datetime import timedelta

from authsvc.accounts.code_tries import prune_code_attempts
from authsvc.apps.idempotency import KEY_LIFETIME, prune_idempotency_keys
from authsvc.apps.keys import register_app
from authsvc.ratelimit import prune_rate_limits
from authsvc.services import token_codec

MINUTE = timedelta(minutes=1)


def test_idempotency_keys_past_their_lifetime_are_pruned(conn, clock):
    app, _key = register_app(conn, "shop", ["https://shop.example.com/"])
    now = clock()
    conn.execute(
        "INSERT INTO idempotency_keys (app_id, key, fingerprint, status_code, response_body,"
        " created_at) VALUES (%s, 'old', '\\x00', 202, '{}', %s),"
        " (%s, 'fresh', '\\x00', 202, '{}', %s)",
        (app.id, now - KEY_LIFETIME - MINUTE, app.id, now - KEY_LIFETIME + MINUTE),
    )
    assert prune_idempotency_keys(conn, now) == 1
    assert [r[0] for r in conn.execute("SELECT key FROM idempotency_keys")] == ["fresh"]


def test_rate_limit_windows_older_than_a_day_are_pruned(conn, clock):
    now = clock()
    conn.execute(
        "INSERT INTO rate_limit_counters (bucket, window_start, hits) VALUES"
        " ('email:old', %s, 3), ('email:new', %s, 1)",
        (now - timedelta(days=2), now - timedelta(hours=23)),
    )
    assert prune_rate_limits(conn, now) == 1
    assert [r[0] for r in conn.execute("SELECT bucket FROM rate_limit_counters")] == ["email:new"]


def test_code_tries_older_than_every_link_lifetime_are_pruned(conn, clock, settings):
    keep = token_codec(settings, clock).longest_code_ttl()  # what the worker passes
    now = clock()
    conn.execute(
        "INSERT INTO code_attempts (purpose, address_digest, attempts, created_at) VALUES"
        " ('verify', '\\x01', 2, %s), ('reset', '\\x02', 1, %s)",
        (now - keep - MINUTE, now - keep + MINUTE),
    )
    assert prune_code_attempts(conn, now, keep) == 1
    assert [r[0] for r in conn.execute("SELECT purpose FROM code_attempts")] == ["reset"]
