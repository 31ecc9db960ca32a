"""Forward-only migrations: numbered .sql files applied under an advisory lock.

A dozen lines of runner instead of a migration framework: the files are plain
SQL, each applied in its own transaction together with its bookkeeping row
(the bookkeeping table itself comes from migrations/0000_schema_migrations.sql),
and a transaction-level advisory lock makes concurrent `authsvc db upgrade`
runs (several containers starting at once) wait for each other instead of
racing, through a transaction pooler too.

A file may commit part-way at a line `-- migrate: commit`, so a statement
after it runs without the locks taken before it: VALIDATE CONSTRAINT after
ADD CONSTRAINT … NOT VALID scans the table under a lock that lets writes go
on only once the ADD's lock is released. The version is recorded with the
last part; a run stopped between parts applies the file again from its top,
so what comes before a commit line must be safe to repeat.

The files start at a baseline (BASELINE): one migration that builds the
schema every earlier file built, which replaced them. A database that
recorded earlier versions only is refused before anything runs: these files
cannot bring it to the baseline, and it upgrades with the previous release
first (docs/OPERATIONS.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import psycopg

from authsvc.db.connections import connect
from authsvc.resources import migrations_dir

# An arbitrary constant naming this lock in pg_locks.
LOCK_KEY = 0x61757468  # "auth"
_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
COMMIT_LINE = "-- migrate: commit"
# 0000 makes schema_migrations; the baseline builds the rest of the schema as
# 0001..0026 left it, in place of those files (migrations/0026_baseline.sql).
BOOKKEEPING = "0000"
BASELINE = "0026"


# docs/OPERATIONS.md has operators build a big table's new index beforehand,
# concurrently, under the migration's name. A concurrent build that failed leaves
# an invalid index under that name, which the migration's `IF NOT EXISTS` would
# keep (never used, yet written on every change): nothing migrates while one is
# there, and the error names it.
REFUSE_INVALID_INDEXES = """
DO $$
DECLARE
    invalid text;
BEGIN
    SELECT c.relname INTO invalid
    FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid
    WHERE NOT i.indisvalid AND c.relnamespace = current_schema()::regnamespace
    ORDER BY c.relname LIMIT 1;
    IF invalid IS NOT NULL THEN
        RAISE EXCEPTION 'index % exists but is invalid (a concurrent build that did not'
            ' finish): drop that index, then run authsvc db upgrade again', invalid;
    END IF;
END $$
"""


class OlderThanBaseline(RuntimeError):
    """The database stopped before the baseline: this release cannot upgrade it."""


@dataclass(frozen=True)
class Migration:
    version: str
    name: str
    path: Path


def available_migrations(folder: Path | None = None) -> list[Migration]:
    folder = folder or migrations_dir()
    found = []
    for path in sorted(folder.iterdir()):
        match = _FILE.match(path.name)
        if match:
            found.append(Migration(match.group(1), match.group(2), path))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"duplicate migration numbers in {folder}")
    # It would run before the baseline on a new database, last on every other.
    if any(BOOKKEEPING < version < BASELINE for version in versions):
        raise RuntimeError(f"a migration numbered below the baseline {BASELINE} in {folder}")
    return found


def transactions(sql: str) -> list[str]:
    """A migration's text cut at its commit lines: one transaction each, in order."""
    parts: list[list[str]] = [[]]
    for line in sql.splitlines(keepends=True):
        if line.strip() == COMMIT_LINE:
            parts.append([])
        else:
            parts[-1].append(line)
    return ["".join(part) for part in parts]


def applied_versions(conn: psycopg.Connection) -> set[str]:
    # Read pg_class with this statement's snapshot, not to_regclass(): the
    # backend's catalog cache may still say "no such table" after another
    # runner created it and released the advisory lock (an advisory lock does
    # not make the backend read pending catalog invalidations), and 0000 would
    # then be applied twice (a UniqueViolation seen through PgBouncer).
    exists = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c"
        " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
        " WHERE c.relname = 'schema_migrations' AND n.nspname = ANY (current_schemas(false)))"
    ).fetchone()
    if not exists or not exists[0]:
        return set()
    return {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}


def pending_migrations(conn: psycopg.Connection) -> list[Migration]:
    done = applied_versions(conn)
    return [m for m in available_migrations() if m.version not in done]


def _refuse_older_than_baseline(done: set[str]) -> None:
    """Raise OlderThanBaseline when `done` (recorded versions) stops before the baseline."""
    if not done - {BOOKKEEPING} or max(done) >= BASELINE:
        return  # a new database, or one at the baseline or later
    raise OlderThanBaseline(
        f"this database's schema is at migration {max(done)}, older than this release's"
        f" baseline {BASELINE}: upgrade it with the previous release of authsvc first, then"
        " run this release's `authsvc db upgrade`; nothing was changed"
    )


def upgrade(url: str) -> list[Migration]:
    """Apply pending migrations; return those this call applied.

    Each migration (each part of one, see COMMIT_LINE) runs in its own
    transaction under a transaction-level advisory lock, re-checking under
    the lock whether another runner applied it meanwhile: a session lock
    would outlive the transaction on the server, which a transaction pooler
    hands to someone else (SPEC §11), so `url` may be the pooled URL.
    """
    applied: list[Migration] = []
    with connect(url) as conn:
        # Before anything runs: 0000 alone would apply to a database made by
        # the runner before it, which the baseline then could not.
        _refuse_older_than_baseline(applied_versions(conn))
        # On a new database nothing is recorded, so 0000 (which creates
        # schema_migrations) runs first and records itself like the rest.
        pending = pending_migrations(conn)
        if pending:
            conn.execute(REFUSE_INVALID_INDEXES)
        for migration in pending:
            if _apply(conn, migration):  # False: another runner applied it meanwhile
                applied.append(migration)
    return applied


def _apply(conn: psycopg.Connection, migration: Migration) -> bool:
    """Apply one migration, a transaction per part; False if another runner did it first."""
    parts = transactions(migration.path.read_text(encoding="utf-8"))
    for index, sql in enumerate(parts):
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
            if migration.version in applied_versions(conn):
                return False
            conn.execute(sql)  # type: ignore[arg-type]  # shipped file, not input
            if index == len(parts) - 1:
                conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                    (migration.version, migration.name),
                )
    return True
