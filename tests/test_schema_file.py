"""migrations/schema.sql is what the migrations build, and the outbox's names are its CHECKs.

procrastinate's check, both ways: the file's generated part is exactly what
tools/schema_sql.py writes from a freshly migrated database (so a migration
without a regenerated file fails here), and the file run alone on an empty
database builds a catalog that tool reads back the same (so the file is the
schema, not a description of it). Then the trail's event names as a CHECK,
and the runner's commit line.
"""

from __future__ import annotations

import difflib
import re

import psycopg
import pytest

from authsvc.db.connections import connect
from authsvc.db.migrate import transactions
from authsvc.outbox import STATUSES
from authsvc.worker.jobs import FINAL_STATUSES, OUTCOME_EVENTS
from chaos import reconcile
from tools.schema_sql import COMMAND, MARKER, SCHEMA_FILE, render

# Trail events written by statements rather than as a claim's outcome:
# authsvc/worker/jobs.sql claim_batch and record_outcomes, outbox/admin.sql redrive_job.
OTHER_TRAIL_EVENTS = {"claimed", "lease_lost", "redriven", "cancelled"}


def _generated_part() -> str:
    text = SCHEMA_FILE.read_text(encoding="utf-8")
    assert MARKER in text, f"{SCHEMA_FILE.name} lost its marker line"
    return text[text.index(MARKER):]


def _rendered(url: str) -> str:
    with connect(url) as conn:
        return render(conn)


def _diff(expected: str, actual: str) -> str:
    lines = difflib.unified_diff(expected.splitlines(keepends=True),
                                 actual.splitlines(keepends=True),
                                 "migrations/schema.sql", "the migrated database", n=1)
    return "".join(list(lines)[:60])


def _major(conn: psycopg.Connection) -> int:
    row = conn.execute("SHOW server_version_num").fetchone()
    assert row is not None
    return int(row[0]) // 10000


def test_schema_file_is_what_the_migrations_build(database_url):
    """database_url is a clone of the session's template, which upgrade() migrated."""
    written, built = _generated_part(), _rendered(database_url)
    made_on = re.search(r"^-- From PostgreSQL (\d+)\b.*\n", written, re.MULTILINE)
    assert made_on, "schema.sql does not say which PostgreSQL it was written from"
    written_here = written.replace(made_on.group(0), "", 1)
    built_here = re.sub(r"^-- From PostgreSQL \d+\b.*\n", "", built, count=1, flags=re.MULTILINE)
    if built_here != written_here:
        with connect(database_url) as conn:
            major = _major(conn)
        if int(made_on.group(1)) != major:
            pytest.skip(f"schema.sql was written from PostgreSQL {made_on.group(1)}, this is"
                        f" {major}: it words some expressions differently")
    assert built_here == written_here, (
        f"migrations/schema.sql is out of date: run `make schema` ({COMMAND})\n"
        f"{_diff(written, built)}")


def test_schema_file_alone_builds_the_catalog_the_migrations_build(
    database_url, empty_database_url
):
    with connect(empty_database_url) as conn, conn.transaction():
        conn.execute(SCHEMA_FILE.read_text(encoding="utf-8"))  # type: ignore[arg-type]
    from_file, migrated = _rendered(empty_database_url), _rendered(database_url)
    assert from_file == migrated, _diff(migrated, from_file)


def _check_names(conn: psycopg.Connection, constraint: str) -> list[str]:
    """The quoted names in a CHECK (column IN (...)), in order, as the catalog holds it."""
    row = conn.execute(
        "SELECT pg_get_constraintdef(oid), convalidated FROM pg_constraint WHERE conname = %s",
        (constraint,),
    ).fetchone()
    assert row is not None, f"no constraint {constraint}"
    definition, validated = row
    assert validated, f"{constraint} is NOT VALID"
    return re.findall(r"'([a-z_]+)'::text", definition)


def test_the_python_names_for_statuses_and_trail_events_are_the_checks(conn):
    """The CHECKs are the one list; the tuples the code switches on cannot drift from them."""
    statuses = _check_names(conn, "email_jobs_status_check")
    assert tuple(statuses) == STATUSES
    # Every final status but an operator's cancel is a worker's outcome.
    assert set(FINAL_STATUSES) == set(statuses) - {"pending", "cancelled"}

    events = _check_names(conn, "email_job_events_event_check")
    assert len(events) == len(set(events)) == 12
    assert set(events) == set(OUTCOME_EVENTS) | OTHER_TRAIL_EVENTS
    assert set(FINAL_STATUSES) <= set(events)  # a final outcome's event is its status
    # The chaos harness's reconciliation reads outcomes from the trail.
    assert reconcile._OUTCOMES == set(OUTCOME_EVENTS) | {"lease_lost"}


def _new_job(conn: psycopg.Connection) -> int:
    row = conn.execute(
        "INSERT INTO email_jobs (template, recipient) VALUES ('password_changed', 'a@example.com')"
        " RETURNING id").fetchone()
    assert row is not None
    return int(row[0])


def test_the_trail_refuses_an_event_name_it_does_not_know(conn):
    job_id = _new_job(conn)
    conn.execute("INSERT INTO email_job_events (job_id, event) VALUES (%s, 'redriven')", (job_id,))
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("INSERT INTO email_job_events (job_id, event) VALUES (%s, 'requeued')",
                     (job_id,))


# The runner's commit line.


def test_a_migration_commits_at_its_commit_lines():
    text = "ALTER TABLE t ADD c;\n-- migrate: commit\nALTER TABLE t VALIDATE c;\n"
    assert transactions(text) == ["ALTER TABLE t ADD c;\n", "ALTER TABLE t VALIDATE c;\n"]
    assert transactions("SELECT 1;\n") == ["SELECT 1;\n"]


def test_no_function_using_a_tables_row_has_a_parsed_body(conn: psycopg.Connection) -> None:
    """PostgreSQL 15 refuses `ALTER TABLE t ADD COLUMN … NOT NULL DEFAULT …` while a function
    with a SQL-standard body (`RETURN …`, `BEGIN ATOMIC`) depends on t's row type (as an
    argument, an array or domain of it, a cast in the body), so the next migration adding
    such a column would stop every upgrade there (16 allows it). Such functions keep a
    quoted body, which the planner inlines all the same."""
    parsed = conn.execute("""
        WITH RECURSIVE row_types (type_oid) AS (
            SELECT ty.oid FROM pg_type AS ty JOIN pg_class AS c ON c.oid = ty.typrelid
            WHERE c.relkind IN ('r', 'p', 'f', 'm')
          UNION
            SELECT ty.oid FROM row_types AS r
            JOIN pg_type AS ty ON ty.typelem = r.type_oid OR ty.typbasetype = r.type_oid
                OR ty.oid IN (SELECT rngtypid FROM pg_range WHERE rngsubtype = r.type_oid))
        SELECT DISTINCT p.oid::regprocedure::text
        FROM pg_proc AS p
        JOIN pg_depend AS d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                           AND d.refclassid = 'pg_type'::regclass
        JOIN row_types AS r ON r.type_oid = d.refobjid
        WHERE p.prosqlbody IS NOT NULL
          AND p.pronamespace NOT IN ('pg_catalog'::regnamespace,
                                     'information_schema'::regnamespace)
    """).fetchall()
    assert parsed == []
