"""Which databases `authsvc db upgrade` takes: new ones, and those at the baseline or later.

migrations/0026_baseline.sql builds in one file the schema that 0001..0026
built one change at a time, and those files are gone. So a database with 0026
recorded (every installation at the release before the baseline) applies only
the migrations written since (0027 on), a new database gets 0000, the baseline
and those, and a database that
recorded only older versions is refused whole: nothing shipped now could bring
it to the baseline, and half an upgrade would be worse than none. Concurrent
runs: the lock test below, tests/test_migrations_cli.py and tests/test_pooler.py.
"""

from __future__ import annotations

import threading

import psycopg
import pytest

from authsvc.db.connections import connect
from authsvc.db.migrate import (
    BASELINE,
    LOCK_KEY,
    OlderThanBaseline,
    applied_versions,
    available_migrations,
    pending_migrations,
    upgrade,
)
from authsvc.resources import migrations_dir
from testkit.waiting import wait_until
from tests.migration_support import (
    RELEASED_BEFORE_THE_BASELINE,
    database_of_an_older_release,
    record,
    what_the_database_holds,
)
from tests.race_support import advisory_locks


def test_a_database_older_than_the_baseline_is_refused_and_left_as_it_was(empty_database_url):
    database_of_an_older_release(empty_database_url, latest="0019")
    before = what_the_database_holds(empty_database_url)
    with pytest.raises(OlderThanBaseline) as refused:
        upgrade(empty_database_url)
    message = str(refused.value)
    assert "\n" not in message
    assert "at migration 0019" in message and f"baseline {BASELINE}" in message, message
    assert "previous release" in message, message
    assert what_the_database_holds(empty_database_url) == before


def test_a_database_made_before_0000_is_refused_before_0000_runs(empty_database_url):
    """The runner that predates 0000 made schema_migrations itself and recorded 0001 on:
    0000 alone would apply to it, and then the baseline could not."""
    database_of_an_older_release(empty_database_url, latest="0004")
    with connect(empty_database_url) as conn:
        conn.execute("DELETE FROM schema_migrations WHERE version = '0000'")
    before = what_the_database_holds(empty_database_url)
    with pytest.raises(OlderThanBaseline, match="at migration 0004"):
        upgrade(empty_database_url)
    assert what_the_database_holds(empty_database_url) == before


def _after_the_baseline() -> list[str]:
    """The migrations written since the baseline, in order."""
    return [m.version for m in available_migrations() if m.version > BASELINE]


def test_a_new_database_gets_0000_and_then_the_baseline(empty_database_url):
    assert BASELINE == RELEASED_BEFORE_THE_BASELINE[-1][0]  # the last version released
    applied = [m.version for m in upgrade(empty_database_url)]
    assert applied == ["0000", BASELINE, *_after_the_baseline()]
    assert upgrade(empty_database_url) == []


def test_a_migration_numbered_below_the_baseline_is_refused(tmp_path):
    """It would run before the baseline on a new database and last on every other."""
    for name in ("0000_schema_migrations.sql", f"{BASELINE}_baseline.sql", "0027_next.sql"):
        (tmp_path / name).write_text("SELECT 1;\n")
    assert [m.version for m in available_migrations(tmp_path)] == ["0000", BASELINE, "0027"]
    (tmp_path / "0003_late.sql").write_text("SELECT 1;\n")
    with pytest.raises(RuntimeError, match="below the baseline"):
        available_migrations(tmp_path)


def test_an_installation_at_0026_gets_only_what_came_after_the_baseline(empty_database_url):
    """Its bookkeeping lists 0000..0026 under their old names; the runner goes by number,
    so it applies the migrations written since the baseline, and nothing else."""
    with connect(empty_database_url) as conn, conn.transaction():
        for name in ("0000_schema_migrations.sql", f"{BASELINE}_baseline.sql"):
            conn.execute((migrations_dir() / name).read_text())  # type: ignore[arg-type]
        record(conn, RELEASED_BEFORE_THE_BASELINE)
    with connect(empty_database_url) as conn:
        assert [m.version for m in pending_migrations(conn)] == _after_the_baseline()
    assert [m.version for m in upgrade(empty_database_url)] == _after_the_baseline()
    before = what_the_database_holds(empty_database_url)
    assert upgrade(empty_database_url) == []
    assert what_the_database_holds(empty_database_url) == before


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
            wait_until(lambda: advisory_locks(first, waiting=True) == 1,
                       what="the second runner waiting for the lock")
            first.execute((migrations_dir() / "0000_schema_migrations.sql").read_text())
            first.execute("INSERT INTO schema_migrations (version, name) VALUES ('0000', 'x')")
        waiting.join(timeout=10)
    assert seen == [{"0000"}]


def test_an_index_a_failed_concurrent_build_left_invalid_stops_its_migration(
        empty_database_url):
    """OPERATIONS says to build 0036's index CONCURRENTLY first on a big outbox; a build
    that fails leaves an invalid index under the name, which IF NOT EXISTS alone would
    keep (never used, yet written on every change): the migration stops and says so."""
    upgrade(empty_database_url)
    with connect(empty_database_url) as conn:
        conn.autocommit = True
        conn.execute("DROP INDEX email_jobs_recipient")
        conn.execute("DELETE FROM schema_migrations WHERE version >= '0036'")
        conn.execute("INSERT INTO email_jobs (template, recipient)"
                     " VALUES ('password_changed', 'twice@example.com'),"
                     "        ('password_changed', 'twice@example.com')")
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute("CREATE UNIQUE INDEX CONCURRENTLY email_jobs_recipient"
                         " ON email_jobs (recipient)")
    with pytest.raises(psycopg.errors.RaiseException,
                       match="email_jobs_recipient exists but is invalid"):
        upgrade(empty_database_url)
    with connect(empty_database_url) as conn:
        conn.autocommit = True
        conn.execute("DROP INDEX email_jobs_recipient")
    assert [m.version for m in upgrade(empty_database_url)][:1] == ["0036"]
    with connect(empty_database_url) as conn:
        assert conn.execute("SELECT i.indisvalid FROM pg_index i JOIN pg_class c"
                            " ON c.oid = i.indexrelid WHERE c.relname = 'email_jobs_recipient'"
                            ).fetchone() == (True,)
