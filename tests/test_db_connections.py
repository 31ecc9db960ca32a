"""Server-side prepared statements only where no pooler can be in between (db/connections.py).

Preparing saves the planning of every repeated statement (half of the
worker's claim), but through a transaction pooler the prepared statement
stays on a server connection the next transaction may not get. So a pool
prepares only when its URL is the direct one.
"""

from __future__ import annotations

import pytest

from authsvc.config import load_settings
from authsvc.db.connections import create_pool, is_direct, resolve_database_url, resolve_listen_url


def _prepared_after_repeats(url: str, *, direct: bool) -> int:
    pool = create_pool(url, min_size=1, max_size=1, direct=direct)
    try:
        with pool.connection() as conn:
            for _ in range(8):
                conn.execute("SELECT count(*) FROM email_jobs WHERE status = %s", ("pending",))
            row = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
    finally:
        pool.close()
    assert row is not None
    return int(row[0])


def test_a_pool_on_the_server_itself_prepares_what_it_repeats(direct_database_url):
    assert _prepared_after_repeats(direct_database_url, direct=True) >= 1


def test_a_pool_that_may_be_behind_a_pooler_never_prepares(direct_database_url):
    assert _prepared_after_repeats(direct_database_url, direct=False) == 0


@pytest.mark.parametrize(("database_url", "direct_url", "expected"), [
    ("postgresql://db:5432/a", "postgresql://db:5432/a", True),  # no pooler: both the same
    ("postgresql://bouncer:6432/a", "postgresql://db:5432/a", False),  # a pooler in front
    ("postgresql://db:5432/a", None, False),  # unknown: it may be a pooler
])
def test_only_the_configured_direct_url_counts_as_the_server(
        tmp_path, database_url, direct_url, expected):
    environ = {"AUTHSVC_ENV": "test", "AUTHSVC_DATA_DIR": str(tmp_path),
               "AUTHSVC_DATABASE_URL": database_url}
    if direct_url:
        environ["AUTHSVC_DIRECT_DATABASE_URL"] = direct_url
    settings = load_settings(environ)
    url = resolve_database_url(settings)
    assert is_direct(url, resolve_listen_url(settings)) is expected
