"""Test databases: one migrated template per test session, one database per worker.

Each xdist worker clones the template once and lends that database to every
integration test, emptied after each (see ReusableDatabase): cloning takes
0.3-0.5 s, the reset a few milliseconds. e2e tests, and every test behind a
pooler, still get a clone of their own, dropped afterwards.

Uses AUTHSVC_TEST_DATABASE_URL when set (CI may point it at a normal server),
otherwise the embedded PostgreSQL from pgserver under a temporary folder.
When that URL is a transaction pooler (`make test-pgbouncer`),
AUTHSVC_TEST_DIRECT_DATABASE_URL names the server itself: databases are
created, cloned and dropped there (a pooler keeps server connections open,
which CREATE DATABASE … TEMPLATE refuses), and tests get it as their
AUTHSVC_DIRECT_DATABASE_URL for LISTEN; everything else goes through the pooler.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from authsvc.db.embedded import start_embedded_postgres
from authsvc.db.migrate import upgrade


def with_database(url: str, dbname: str) -> str:
    """The same server URL pointing at another database."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + dbname))


class TestDatabases:
    """Creates the template once and clones it per test (CREATE DATABASE … TEMPLATE)."""

    __test__ = False

    def __init__(self, server_url: str, tag: str, direct_url: str | None = None) -> None:
        self.server_url = server_url
        self.direct_url = direct_url or server_url
        self.tag = tag
        self.template = f"authsvc_tpl_{tag}_{os.getpid()}"
        self._reusable: ReusableDatabase | None = None
        with psycopg.connect(self.direct_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(self.template)
                )
            )
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.template)))
        upgrade(with_database(self.direct_url, self.template))

    @contextmanager
    def lend(self, *, own: bool = False) -> Iterator[str]:
        """A migrated database with no rows, for one test.

        The worker's reusable database, emptied afterwards; a clone of its own
        when `own` (a test whose processes may outlive it by a moment) or behind
        a pooler (which keeps server connections to the database open between
        tests, and so the session state the reset clears by ending them).
        """
        if own or self.pooled:
            url = self.create()
            try:
                yield url
            finally:
                self.drop(url)
            return
        if self._reusable is None:
            self._reusable = ReusableDatabase(self, f"authsvc_w_{self.tag}_{os.getpid()}")
        try:
            yield self._reusable.url
        finally:
            self._reusable.reset()

    def create(self, name: str | None = None) -> str:
        """A fresh migrated database; its URL goes through the pooler when there is one."""
        name = name or f"authsvc_t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.direct_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                    sql.Identifier(name), sql.Identifier(self.template)
                )
            )
        return with_database(self.server_url, name)

    @contextmanager
    def empty(self) -> Iterator[str]:
        """A database with no migrations applied, dropped afterwards."""
        name = f"authsvc_empty_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.direct_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        url = with_database(self.server_url, name)
        try:
            yield url
        finally:
            self.drop(url)

    def direct(self, url: str) -> str:
        """The same database on the server itself, bypassing any pooler."""
        return with_database(self.direct_url, urlsplit(url).path.lstrip("/"))

    @property
    def pooled(self) -> bool:
        return self.direct_url != self.server_url

    def drop(self, url: str) -> None:
        name = urlsplit(url).path.lstrip("/")
        with psycopg.connect(self.direct_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    def close(self) -> None:
        if self._reusable is not None:
            self.drop(self._reusable.url)
        self.drop(with_database(self.server_url, self.template))


# What a test may change in a database beyond its rows, as one digest: which rows
# the catalogs below hold for the kinds of object the migrations make (schemas,
# tables and their columns, defaults, indexes, triggers, constraints, functions,
# types, rules, policies, sequences, comments, privileges, settings), and the
# transaction that last wrote each (xmin): creating, altering or dropping one
# adds, rewrites or removes such a row. Comparing xmins rather than whole rows
# costs about 3 ms a reset instead of 15. Kinds the migrations never make
# (casts, operators, collations, publications, extended statistics) are not
# looked at. initdb's own objects have OIDs below 16384 (FirstNormalObjectId).
# VACUUM and ANALYZE change pg_class in place (no new xmin); TRUNCATE writes new
# pg_class rows, so a reset that truncates takes the digest again. Temporary
# schemas are left out: their objects go with the session that made them, and
# the reset ends every session.
SCHEMA_DIGEST = r"""
WITH ns AS (
    SELECT n.oid, n.xmin FROM pg_namespace n
    WHERE n.nspname = 'public' OR (n.oid >= 16384 AND n.nspname NOT LIKE 'pg\_%')
), rel AS (
    SELECT c.oid, c.xmin FROM pg_class c WHERE c.relnamespace IN (SELECT oid FROM ns)
)
SELECT md5(concat_ws('|',
    (SELECT array_agg(n ORDER BY n.oid)::text FROM ns n),
    (SELECT array_agg(r ORDER BY r.oid)::text FROM rel r),
    (SELECT array_agg((a.attrelid, a.attnum, a.xmin) ORDER BY a.attrelid, a.attnum)::text
     FROM pg_attribute a WHERE a.attrelid IN (SELECT oid FROM rel)),
    (SELECT array_agg((d.oid, d.xmin) ORDER BY d.oid)::text
     FROM pg_attrdef d WHERE d.adrelid IN (SELECT oid FROM rel)),
    (SELECT array_agg((i.indexrelid, i.xmin) ORDER BY i.indexrelid)::text
     FROM pg_index i WHERE i.indrelid IN (SELECT oid FROM rel)),
    (SELECT array_agg((t.oid, t.xmin) ORDER BY t.oid)::text
     FROM pg_trigger t WHERE t.tgrelid IN (SELECT oid FROM rel)),
    (SELECT array_agg((c.oid, c.xmin) ORDER BY c.oid)::text
     FROM pg_constraint c WHERE c.connamespace IN (SELECT oid FROM ns)),
    (SELECT array_agg((p.oid, p.xmin) ORDER BY p.oid)::text
     FROM pg_proc p WHERE p.pronamespace IN (SELECT oid FROM ns)),
    (SELECT array_agg((t.oid, t.xmin) ORDER BY t.oid)::text
     FROM pg_type t WHERE t.typnamespace IN (SELECT oid FROM ns)),
    (SELECT array_agg((e.oid, e.xmin) ORDER BY e.oid)::text FROM pg_enum e WHERE e.oid >= 16384),
    (SELECT array_agg((r.oid, r.xmin) ORDER BY r.oid)::text
     FROM pg_rewrite r WHERE r.ev_class IN (SELECT oid FROM rel)),
    (SELECT array_agg((p.oid, p.xmin) ORDER BY p.oid)::text
     FROM pg_policy p WHERE p.polrelid IN (SELECT oid FROM rel)),
    (SELECT array_agg((s.seqrelid, s.xmin) ORDER BY s.seqrelid)::text
     FROM pg_sequence s WHERE s.seqrelid IN (SELECT oid FROM rel)),
    (SELECT array_agg((i.inhrelid, i.inhseqno, i.xmin) ORDER BY i.inhrelid, i.inhseqno)::text
     FROM pg_inherits i WHERE i.inhrelid IN (SELECT oid FROM rel)),
    (SELECT array_agg((d.objoid, d.classoid, d.objsubid, d.xmin)
                      ORDER BY d.objoid, d.classoid, d.objsubid)::text
     FROM pg_description d WHERE d.objoid >= 16384),
    (SELECT array_agg((e.oid, e.xmin) ORDER BY e.oid)::text FROM pg_extension e),
    (SELECT array_agg((e.oid, e.xmin) ORDER BY e.oid)::text FROM pg_event_trigger e),
    (SELECT array_agg((a.oid, a.xmin) ORDER BY a.oid)::text FROM pg_default_acl a),
    (SELECT count(*)::text FROM pg_largeobject_metadata),
    (SELECT array_agg((s.setrole, s.xmin) ORDER BY s.setrole)::text FROM pg_db_role_setting s
     JOIN pg_database d ON d.oid = s.setdatabase WHERE d.datname = current_database()),
    (SELECT (d.datallowconn, d.datconnlimit, d.datacl)::text
     FROM pg_database d WHERE d.datname = current_database())
))
"""
TABLES = r"""
SELECT n.nspname, c.relname,
       EXISTS (SELECT FROM pg_constraint f WHERE f.conrelid = c.oid AND f.contype = 'f')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p')
  AND (n.nspname = 'public' OR (n.oid >= 16384 AND n.nspname NOT LIKE 'pg\_%'))
ORDER BY 1, 2
"""
SEQUENCES = r"""
SELECT format('%I.%I', schemaname, sequencename), last_value, start_value
FROM pg_sequences WHERE schemaname = 'public'
   OR (schemaname <> 'information_schema' AND schemaname NOT LIKE 'pg\_%')
"""


# The most any table a test wrote to may take (8 pages, dead rows and TOAST
# included) for the reset to empty them by DELETE.
SMALL_TABLE_BYTES = 64 << 10


class SchemaChanged(Exception):
    """A test changed the schema of the reusable database."""


class ReusableDatabase:
    """One worker's test database: cloned from the template once, emptied after each test.

    The reset ends every other session on it (as DROP DATABASE … WITH (FORCE)
    did: no lock, LISTEN or prepared statement outlives its test), truncates
    the tables a test left rows in, puts back the rows the migrations wrote
    (schema_migrations) when a test changed them, and sets each sequence back
    to where the migrations left it. A test that changed the schema (made,
    altered or dropped anything) or dropped the database, and any reset that
    fails, gets the database cloned again from the template.
    """

    def __init__(self, databases: TestDatabases, name: str) -> None:
        self.databases = databases
        self.name = name
        self.url = databases.create(name)
        self._admin_url = with_database(databases.direct_url, name)
        # The migrations' own rows, as COPY text, per table; and which of those
        # tables a TRUNCATE … CASCADE of others can reach (they reference a table).
        # Tables by index, as the dirty-tables query names them.
        self._tables: list[sql.Identifier] = []
        self._rows: dict[int, bytes] = {}
        self._referencing: set[int] = set()
        checks: list[sql.Composable] = []
        with psycopg.connect(self._admin_url, autocommit=True) as conn:
            self._schema = self._cloned_schema = _one(conn, sql.SQL(SCHEMA_DIGEST))
            for schema, name_, references in conn.execute(TABLES).fetchall():
                index, table = len(self._tables), sql.Identifier(schema, name_)
                self._tables.append(table)
                exists = sql.SQL("EXISTS (SELECT FROM {})").format(table)
                test: sql.Composable = exists
                if _one(conn, sql.SQL("SELECT {}").format(exists)) == "True":
                    self._rows[index] = _copy_out(conn, table)
                    if references:
                        self._referencing.add(index)
                    test = sql.SQL("({}) <> {}").format(
                        _rows_digest(table), sql.Literal(_one(conn, _rows_digest(table)))
                    )
                checks.append(sql.SQL("SELECT {} WHERE {}").format(sql.Literal(index), test))
            self._sequences = {
                seq: (last, start) for seq, last, start in conn.execute(SEQUENCES)
            }
        # One statement names (by index) the tables a test left rows in or changed.
        self._dirty_query = sql.SQL(" UNION ALL ").join(checks)

    def reset(self) -> None:
        try:
            self._empty()
        except (psycopg.Error, SchemaChanged):
            # Dropped by the test, held by a lock that outlived it, …: start over,
            # from a clone whose catalogs are the template's, xmins included.
            self.databases.drop(self.url)
            self.databases.create(self.name)
            self._schema = self._cloned_schema

    def _empty(self) -> None:
        with psycopg.connect(self._admin_url, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            if _one(conn, sql.SQL(SCHEMA_DIGEST)) != self._schema:
                raise SchemaChanged
            conn.execute("SET lock_timeout = '5s'")
            dirty = [row[0] for row in conn.execute(self._dirty_query)]
            empty = [self._tables[index] for index in dirty if index not in self._rows]
            restore = {index for index in dirty if index in self._rows}
            # A few rows go faster by DELETE than by TRUNCATE, which makes and
            # removes files (about 20 ms a test, most of a reset); a table grown
            # past SMALL_TABLE_BYTES, dead rows and TOAST included, is truncated
            # instead, so what a later test's planner sees stays small.
            largest = conn.execute(
                "SELECT coalesce(max(pg_table_size(t::regclass)), 0)"
                " FROM unnest(%s::text[]) AS t", ([t.as_string(conn) for t in empty],)
            ).fetchone()
            small = largest is not None and largest[0] <= SMALL_TABLE_BYTES
            if empty and not small:
                restore |= self._referencing
            if empty or restore:
                with conn.transaction():
                    # No trigger fires and no foreign key is checked: the reset is no
                    # test's doing, and it empties every table a test wrote to.
                    conn.execute("SET LOCAL session_replication_role = replica")
                    if small:
                        for table in empty:
                            conn.execute(sql.SQL("DELETE FROM {}").format(table))
                    else:
                        conn.execute(
                            sql.SQL("TRUNCATE {} CASCADE").format(sql.SQL(", ").join(empty))
                        )
                    for index in sorted(restore):
                        table = self._tables[index]
                        conn.execute(sql.SQL("DELETE FROM {}").format(table))
                        with conn.cursor().copy(
                            sql.SQL("COPY {} FROM STDIN").format(table)
                        ) as copy:
                            copy.write(self._rows[index])
                if not small:
                    self._schema = _one(conn, sql.SQL(SCHEMA_DIGEST))
            for seq, last, start in conn.execute(SEQUENCES).fetchall():
                if (last, start) != self._sequences[seq]:
                    was, began = self._sequences[seq]
                    conn.execute(
                        "SELECT setval(%s::regclass, %s, %s)",
                        (seq, began if was is None else was, was is not None),
                    )


def _one(conn: psycopg.Connection, query: sql.SQL | sql.Composed) -> str:
    row = conn.execute(query).fetchone()
    assert row is not None
    return str(row[0])


def _rows_digest(table: sql.Identifier) -> sql.Composed:
    return sql.SQL(
        "SELECT md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), '')) FROM {} t"
    ).format(table)


def _copy_out(conn: psycopg.Connection, table: sql.Identifier) -> bytes:
    data = bytearray()
    with conn.cursor().copy(sql.SQL("COPY {} TO STDOUT").format(table)) as copy:
        for chunk in copy:
            data += chunk
    return bytes(data)


def direct_server_url() -> str | None:
    """AUTHSVC_TEST_DIRECT_DATABASE_URL: the server behind a pooled test URL, if any."""
    return os.environ.get("AUTHSVC_TEST_DIRECT_DATABASE_URL") or None


def create_embedded_server_user() -> None:
    """As root, create the system user the embedded PostgreSQL runs as, once.

    pgserver creates it (useradd) the first time a server starts; on a new machine
    the test processes start theirs at the same moment, race to create it, and the
    loser's initdb fails ("could not look up effective user ID"). Called before
    those processes start.
    """
    if os.geteuid() != 0:  # with a test server URL too: e2e tests start servers of their own
        return
    from pgserver.utils import ensure_user_exists

    ensure_user_exists("pgserver")  # the name pgserver gives it


def server_url(tmp_root: Path) -> tuple[str, object | None]:
    """(URL of a maintenance database, embedded server handle or None)."""
    configured = os.environ.get("AUTHSVC_TEST_DATABASE_URL")
    if configured:
        return configured, None
    handle = start_embedded_postgres(tmp_root)
    url = str(handle.get_uri())
    with psycopg.connect(url, autocommit=True) as conn:
        for setting in THROWAWAY_SERVER:
            conn.execute(sql.SQL("ALTER SYSTEM SET {} = off").format(sql.Identifier(setting)))
        conn.execute("SELECT pg_reload_conf()")
    return url, handle


# The embedded test server's data is thrown away with the run and no test
# crashes it, so nothing need survive a crash: no flush to disk at commit,
# CREATE DATABASE, TRUNCATE or checkpoints, nor whole pages in the WAL. With
# fsync off a commit's WAL flush is a write alone, so synchronous_commit keeps
# its default (tests/test_ratelimit_commits.py holds the code to restoring it).
# Set with ALTER SYSTEM in that server's own data folder, and only there:
# never for `authsvc dev`, a configured AUTHSVC_TEST_DATABASE_URL, or the
# servers e2e tests start themselves.
THROWAWAY_SERVER = ("fsync", "full_page_writes")
