"""Upgrading a database the earlier code wrote: what it left behind must not survive as a hole."""

from __future__ import annotations

import threading

from authsvc.db.connections import connect
from authsvc.db.migrate import LOCK_KEY, applied_versions
from authsvc.resources import migrations_dir
from testkit.waiting import wait_until
from tests.accounts_support import one_number

OWNER, ATTACKER = "owner passphrase one", "attacker passphrase one"


def test_a_runner_that_waited_for_the_lock_sees_the_table_the_first_runner_made(
    empty_database_url,
):
    """Two `db upgrade` runs on a new database (through a pooler they share no session).

    The second waits for the advisory lock while the first creates
    schema_migrations. Once it holds the lock it must see that table and the
    first run's row; read through the catalog cache it saw "no table" and
    applied 0000 again (a UniqueViolation in the pooled suite).
    """
    with connect(empty_database_url) as first, connect(empty_database_url) as second:
        assert applied_versions(second) == set()  # the second runner looked first
        seen: list[set[str]] = []

        def second_runner() -> None:
            with second.transaction():
                second.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
                seen.append(applied_versions(second))

        with first.transaction():
            first.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
            waiting = threading.Thread(target=second_runner)
            waiting.start()
            wait_until(
                lambda: one_number(
                    first,
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
                ) == 1,
                what="the second runner waiting for the lock",
            )
            first.execute((migrations_dir() / "0000_schema_migrations.sql").read_text())
            first.execute("INSERT INTO schema_migrations (version, name) VALUES ('0000', 'x')")
        waiting.join(timeout=10)
    assert seen == [{"0000"}]
