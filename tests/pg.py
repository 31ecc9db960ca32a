"""Test databases: one migrated template per test session, one clone per test.

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
        self.template = f"authsvc_tpl_{tag}_{os.getpid()}"
        with psycopg.connect(self.direct_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(self.template)
                )
            )
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.template)))
        upgrade(with_database(self.direct_url, self.template))

    def create(self) -> str:
        """A fresh migrated database; its URL goes through the pooler when there is one."""
        name = f"authsvc_t_{uuid.uuid4().hex[:12]}"
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
        self.drop(with_database(self.server_url, self.template))


def direct_server_url() -> str | None:
    """AUTHSVC_TEST_DIRECT_DATABASE_URL: the server behind a pooled test URL, if any."""
    return os.environ.get("AUTHSVC_TEST_DIRECT_DATABASE_URL") or None


def server_url(tmp_root: Path) -> tuple[str, object | None]:
    """(URL of a maintenance database, embedded server handle or None)."""
    configured = os.environ.get("AUTHSVC_TEST_DATABASE_URL")
    if configured:
        return configured, None
    handle = start_embedded_postgres(tmp_root)
    return str(handle.get_uri()), handle
