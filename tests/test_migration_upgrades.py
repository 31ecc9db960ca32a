"""Upgrading a database the earlier code wrote: what it left behind must not survive as a hole."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import psycopg
import pytest

from authsvc.accounts import actions
from authsvc.accounts.code_tries import address_digest, count_attempt
from authsvc.accounts.tokens import TokenClaims
from authsvc.config import load_settings
from authsvc.db.connections import connect, create_pool
from authsvc.db.migrate import LOCK_KEY, applied_versions, upgrade
from authsvc.resources import migrations_dir
from authsvc.services import build_services
from testkit.waiting import wait_until
from tests.accounts_support import one_number
from tests.migration_support import migrate_before

OWNER, ATTACKER = "owner passphrase one", "attacker passphrase one"


def _database_of_the_first_release(url: str) -> None:
    """Migration 0001 applied and recorded the way that release's migrate.py did it."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute((migrations_dir() / "0001_initial.sql").read_text(encoding="utf-8"))
        conn.execute(
            "CREATE TABLE schema_migrations (version text PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        conn.execute("INSERT INTO schema_migrations VALUES ('0001', 'initial')")


def test_a_password_swapped_under_the_old_code_is_not_confirmed_by_the_owners_link(
    empty_database_url, env, clock, passwords
):
    """Before 0002 an attacker's second signup swapped an unconfirmed account's
    password without a new link. After the upgrade, the owner's own link must
    not confirm that password: every unconfirmed account starts out contested."""
    _database_of_the_first_release(empty_database_url)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        user_id = one_number(
            conn,
            "INSERT INTO users (email, password_hash, verify_version)"
            " VALUES ('victim@example.com', %s, 1) RETURNING id",
            (passwords.hash(OWNER),),
        )
        conn.execute("UPDATE users SET password_hash = %s", (passwords.hash(ATTACKER),))
    upgrade(empty_database_url)

    settings = load_settings({**env, "AUTHSVC_DATABASE_URL": empty_database_url})
    issued = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    clock.now = issued
    with create_pool(empty_database_url, min_size=1, max_size=2) as pool, pool.connection() as conn:
        conn.autocommit = True
        svc = build_services(settings, pool, clock=clock, passwords=passwords)
        owners_link = svc.tokens.mint(TokenClaims(user_id, "verify", 1, issued))
        with pytest.raises(actions.PasswordRequired):
            actions.confirm_verification(conn, svc, token=owners_link)
        actions.confirm_verification(conn, svc, token=owners_link, password="owners new choice 7")
        with pytest.raises(actions.InvalidCredentials):
            actions.authenticate(conn, svc, email="victim@example.com", password=ATTACKER)
        actions.authenticate(conn, svc, email="victim@example.com", password="owners new choice 7")


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


def test_tries_counted_per_version_become_one_count_per_address_and_none_are_gained(
    empty_database_url,
):
    """0020 counts tries per (purpose, address): each address keeps its most tries
    of any version (an upgrade must not hand out fresh guesses) and its latest
    start (no count is pruned sooner than before)."""
    migrate_before(empty_database_url, "0020")
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        ann, bo = address_digest("ann@example.com"), address_digest("bo@example.com")
        at = [datetime(2026, 3, 1, hour, 0, tzinfo=UTC) for hour in (10, 11, 12)]
        conn.execute(
            "INSERT INTO code_attempts (purpose, address_digest, version, attempts, created_at)"
            " VALUES ('verify', %(ann)s, 0, 2, %(t0)s), ('verify', %(ann)s, 3, 5, %(t1)s),"
            " ('verify', %(ann)s, 4, 1, %(t2)s), ('reset', %(ann)s, 1, 3, %(t1)s),"
            " ('verify', %(bo)s, 0, 4, %(t0)s)",
            {"ann": ann, "bo": bo, "t0": at[0], "t1": at[1], "t2": at[2]},
        )
    upgrade(empty_database_url)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT purpose, address_digest, attempts, created_at FROM code_attempts"
            " ORDER BY purpose, attempts"
        ).fetchall()
        assert rows == [("reset", ann, 3, at[1]), ("verify", bo, 4, at[0]),
                        ("verify", ann, 5, at[2])]
        assert count_attempt(conn, "ann@example.com", "verify", at[2]).exhausted
