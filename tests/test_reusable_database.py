"""The reset between tests: every row a test wrote goes, every schema change is undone."""

from __future__ import annotations

import os
from collections.abc import Iterator

import psycopg
import pytest

from tests.pg import SMALL_TABLE_BYTES, ReusableDatabase, TestDatabases


@pytest.fixture
def reusable(test_databases: TestDatabases) -> Iterator[ReusableDatabase]:
    if test_databases.pooled:
        pytest.skip("behind a pooler every test gets a clone of its own, never a reset")
    database = ReusableDatabase(test_databases, f"authsvc_reset_check_{os.getpid()}")
    yield database
    test_databases.drop(database.url)


JOB = ("INSERT INTO email_jobs (template, recipient)"
       " VALUES ('password_changed', 'a@example.com') RETURNING id")
COLUMNS = "SELECT count(*) FROM pg_attribute WHERE attrelid = 'users'::regclass"
CLONE = "SELECT oid FROM pg_database WHERE datname = current_database()"


def _one(url: str, query: str) -> object:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(query).fetchone()
        assert row is not None
        return row[0]


def test_rows_go_and_the_migrations_rows_stay(reusable: ReusableDatabase) -> None:
    versions = _one(reusable.url, "SELECT count(*) FROM schema_migrations")
    clone = _one(reusable.url, CLONE)
    with psycopg.connect(reusable.url, autocommit=True) as conn:
        conn.execute("INSERT INTO users (email, password_hash) VALUES ('a@example.com', 'x')")
        first = conn.execute(JOB).fetchone()
        conn.execute("DELETE FROM schema_migrations")
    reusable.reset()
    assert _one(reusable.url, "SELECT count(*) FROM users") == 0
    assert _one(reusable.url, "SELECT count(*) FROM schema_migrations") == versions
    with psycopg.connect(reusable.url, autocommit=True) as conn:
        # The sequences start again where the migrations left them.
        assert conn.execute(JOB).fetchone() == first
    reusable.reset()
    assert _one(reusable.url, CLONE) == clone, "rows alone never cost a fresh clone"


def test_a_table_grown_large_is_emptied_too(reusable: ReusableDatabase) -> None:
    clone = _one(reusable.url, CLONE)
    with psycopg.connect(reusable.url, autocommit=True) as conn:
        conn.execute("INSERT INTO users (email, password_hash) SELECT 'u' || n || '@example.com',"
                     " repeat('x', 200) FROM generate_series(1, 20000) AS n")
    assert int(str(_one(reusable.url, "SELECT pg_relation_size('users')"))) > SMALL_TABLE_BYTES
    reusable.reset()
    assert _one(reusable.url, "SELECT count(*) FROM users") == 0
    # The truncation rewrote the catalog's rows for the table: not a schema change.
    with psycopg.connect(reusable.url, autocommit=True) as conn:
        conn.execute("INSERT INTO users (email, password_hash) VALUES ('a@example.com', 'x')")
    reusable.reset()
    assert _one(reusable.url, "SELECT count(*) FROM users") == 0
    assert _one(reusable.url, CLONE) == clone
    # A schema change then costs one fresh clone, not one for every reset after it.
    with psycopg.connect(reusable.url, autocommit=True) as conn:
        conn.execute("CREATE TABLE stray (n int)")
    reusable.reset()
    clone = _one(reusable.url, CLONE)
    for address in ("b@example.com", "c@example.com"):
        with psycopg.connect(reusable.url, autocommit=True) as conn:
            conn.execute("INSERT INTO users (email, password_hash) VALUES (%s, 'x')", (address,))
        reusable.reset()
        assert _one(reusable.url, CLONE) == clone


@pytest.mark.parametrize("change", [
    "CREATE TABLE stray (n int)",
    "ALTER TABLE users ADD COLUMN stray int",
    "CREATE INDEX stray ON users (created_at)",
    "CREATE OR REPLACE FUNCTION outbox_delete_trails() RETURNS trigger LANGUAGE plpgsql"
    " AS $$ BEGIN RETURN NULL; END $$",
    "DROP TRIGGER outbox_delete_trails ON email_jobs",
    "COMMENT ON TABLE users IS 'stray'",
    "ALTER TABLE users ALTER COLUMN email SET STATISTICS 5",
])
def test_any_schema_change_gets_a_fresh_clone(reusable: ReusableDatabase, change: str) -> None:
    probe = ("SELECT md5(coalesce(string_agg(prosrc, '' ORDER BY oid), '')) || count(*)"
             " FROM pg_proc WHERE pronamespace = 'public'::regnamespace")
    functions = _one(reusable.url, probe)
    clone = _one(reusable.url, CLONE)
    columns = _one(reusable.url, COLUMNS)
    with psycopg.connect(reusable.url, autocommit=True) as conn:
        conn.execute(change)
    reusable.reset()
    assert _one(reusable.url, CLONE) != clone
    assert _one(reusable.url, "SELECT count(*) FROM pg_class WHERE relname = 'stray'") == 0
    assert _one(reusable.url, probe) == functions
    assert _one(reusable.url, COLUMNS) == columns
    assert _one(reusable.url,
                "SELECT count(*) FROM pg_trigger WHERE tgname = 'outbox_delete_trails'") == 1
    assert _one(reusable.url, "SELECT obj_description('users'::regclass)") is None
    assert _one(reusable.url, "SELECT attstattarget FROM pg_attribute"
                " WHERE attrelid = 'users'::regclass AND attname = 'email'") == -1
