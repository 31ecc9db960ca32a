"""Every named query against the migrated schema, and a new database's bookkeeping.

procrastinate's check: apply all migrations to a fresh database and PREPARE
every named query from every .sql file the code loads, so a query that no
longer matches the schema (a renamed column, a dropped function) fails here
rather than in production. PREPARE parses, resolves every name and plans
without running anything; parameters stay untyped so PostgreSQL infers them.
"""

from __future__ import annotations

import re
from pathlib import Path

import psycopg

from authsvc.db.migrate import available_migrations, upgrade
from authsvc.db.queries import load_queries

ROOT = Path(__file__).resolve().parent.parent
SQL_FILES = sorted((ROOT / "authsvc").rglob("*.sql"))
_PARAM = re.compile(r"%\((\w+)\)[sbt]")  # psycopg's formats: auto, binary, text


def as_prepared(query: str) -> str:
    """psycopg's %(name)s (and %(name)b, %(name)t) placeholders as PREPARE's $n, one per name."""
    numbers: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        return f"${numbers.setdefault(match.group(1), len(numbers) + 1)}"

    return _PARAM.sub(number, query).replace("%%", "%")


def queries_not_matching(conn: psycopg.Connection) -> dict[str, str]:
    """file:query -> PostgreSQL's complaint, for every named query that does not prepare."""
    failures: dict[str, str] = {}
    for path in SQL_FILES:
        for name, query in load_queries(path).items():
            label = f"{path.relative_to(ROOT)}:{name}"
            try:
                # One transaction: behind a transaction pooler, both statements on one
                # server connection.
                with conn.transaction():
                    conn.execute(f"PREPARE schema_check AS {as_prepared(query)}")  # type: ignore[arg-type]
                    conn.execute("DEALLOCATE schema_check")
            except psycopg.Error as exc:
                failures[label] = str(exc).splitlines()[0]
    return failures


def test_the_placeholders_become_numbered_parameters():
    query = "SELECT %(a)s, %(b)s, %(a)s, %(c)b WHERE x LIKE 'p%%'"
    assert as_prepared(query) == "SELECT $1, $2, $1, $3 WHERE x LIKE 'p%'"


def test_every_named_query_prepares_against_a_freshly_migrated_database(empty_database_url):
    assert len(SQL_FILES) >= 8, SQL_FILES
    upgrade(empty_database_url)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        assert queries_not_matching(conn) == {}


def test_a_renamed_column_or_a_dropped_rule_fails_the_check(conn):
    """The check has teeth: the claim and the stats break visibly when the schema moves."""
    conn.execute("ALTER TABLE email_jobs RENAME COLUMN lease_owner TO lease_holder")
    conn.execute("DROP FUNCTION outbox_job_leased")
    failures = queries_not_matching(conn)
    assert "authsvc/worker/jobs.sql:claim_batch" in failures
    assert "authsvc/worker/jobs.sql:record_outcomes" in failures
    assert "lease_owner" in failures["authsvc/outbox/admin.sql:list_jobs"]
    assert "outbox_job_leased" in failures["authsvc/outbox/admin.sql:pending_figures"]
    assert "authsvc/accounts/users.sql" not in " ".join(failures)  # untouched tables still prepare


def test_a_new_database_gets_its_bookkeeping_from_migration_0000(empty_database_url):
    applied = upgrade(empty_database_url)
    assert [m.version for m in applied] == [m.version for m in available_migrations()]
    assert applied[0].version == "0000"
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        row = conn.execute("SELECT name FROM schema_migrations WHERE version = '0000'").fetchone()
    assert row == ("schema_migrations",)
