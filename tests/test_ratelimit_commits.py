"""Rate-limit counts that commit without waiting for the disk, and only where that is safe.

An app's API calls (and one address's form posts) all count on one row, and
each count held that row through its commit's WAL flush, so the calls queued
behind each other (issue 11). Such a count now commits without the wait; a
lost count costs nothing. What must never happen is the setting outliving
that one statement: a later write on the same pooled connection, or the
rest of a caller's transaction, would then be acknowledged before it is
durable.
"""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest

from authsvc import ratelimit
from authsvc.apps.keys import KEY_PREFIX, find_app_counting_call, register_app, revoke_app
from authsvc.config import RateLimit

LIMIT = RateLimit(2, 60)


def test_a_count_that_does_not_wait_still_counts_and_leaves_the_session_durable(
        direct_database_url: str, conn: psycopg.Connection) -> None:
    now = datetime.now(UTC)
    # The server itself: through a pooler the next statement may meet another backend.
    with psycopg.connect(direct_database_url, autocommit=True) as own:
        decisions = [ratelimit.hit(own, "app", "hot", LIMIT, now, wait_for_disk=False).allowed
                     for _ in range(3)]
        assert decisions == [True, True, False]
        assert own.execute("SHOW synchronous_commit").fetchone() == ("on",)
    # Committed, as any other count: another connection sees all three.
    assert conn.execute("SELECT sum(hits) FROM rate_limit_counters").fetchone() == (3,)


def test_only_the_counting_statement_skips_the_disk_wait(direct_database_url: str) -> None:
    """The count's own transaction commits without the wait; the next one waits again."""
    now = datetime.now(UTC)
    with psycopg.connect(direct_database_url, autocommit=True) as own:
        for wait, mode in ((False, "off"), (True, "on")):
            row = own.execute("SELECT rate_limit_hit('app:x', %s, 10, %s),"
                              " current_setting('synchronous_commit')", (now, wait)).fetchone()
            assert row == (True, mode)
        assert own.execute("SHOW synchronous_commit").fetchone() == ("on",)


def test_a_count_in_a_pipeline_must_wait_for_the_disk(direct_database_url: str) -> None:
    """A pipeline's statements share one implicit transaction up to the next sync."""
    with psycopg.connect(direct_database_url, autocommit=True) as own, own.pipeline():
        with pytest.raises(ValueError, match="outside a pipeline"):
            ratelimit.hit(own, "ip", "192.0.2.1", LIMIT, datetime.now(UTC), wait_for_disk=False)


def test_a_count_inside_a_transaction_must_wait_for_the_disk(conn: psycopg.Connection) -> None:
    now = datetime.now(UTC)
    with conn.transaction():
        with pytest.raises(ValueError, match="outside a transaction"):
            ratelimit.hit(conn, "email_reset", "a@example.com", LIMIT, now, wait_for_disk=False)
        # The durable form is what a transaction's own counts use.
        assert ratelimit.hit(conn, "email_reset", "a@example.com", LIMIT, now).allowed


def test_a_connection_that_opens_transactions_itself_cannot_skip_the_wait(
        direct_database_url: str) -> None:
    with psycopg.connect(direct_database_url) as not_autocommit:
        with pytest.raises(ValueError, match="autocommit"):
            ratelimit.hit(not_autocommit, "ip", "192.0.2.1", LIMIT, datetime.now(UTC),
                          wait_for_disk=False)


def test_an_api_call_is_counted_with_its_key_lookup_and_only_for_a_live_key(
        conn: psycopg.Connection) -> None:
    """One round trip looks the key up and counts the call (issue 11).

    A scanner spraying made-up keys, or a revoked app, must not get a
    counter row per try: only a live key's calls are counted.
    """
    now = datetime.now(UTC)
    with conn.transaction():
        app, key = register_app(conn, "counted", ["https://app.example/"])
        revoked, revoked_key = register_app(conn, "revoked", ["https://app.example/"])
    revoke_app(conn, revoked.id)
    for stranger in (revoked_key, KEY_PREFIX + "made-up", "not-a-key"):
        assert find_app_counting_call(conn, stranger, LIMIT, now) is None
    assert conn.execute("SELECT count(*) FROM rate_limit_counters").fetchone() == (0,)

    verdicts = [find_app_counting_call(conn, key, LIMIT, now) for _ in range(3)]
    assert [(found[0].id, found[1].allowed) for found in verdicts if found] == [
        (app.id, True), (app.id, True), (app.id, False)]
    with conn.transaction(), pytest.raises(ValueError, match="outside a transaction"):
        find_app_counting_call(conn, key, LIMIT, now)
