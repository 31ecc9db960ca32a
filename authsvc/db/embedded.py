"""The embedded PostgreSQL (pgserver) used when no database URL is configured."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def start_embedded_postgres(data_dir: Path) -> Any:
    """Start (or join) the server for `data_dir`/pgdata and return its handle.

    pgserver shares one postmaster between every process that asks for the
    same folder and stops it when the last of them exits, so the web workers,
    the outbox worker and the CLI can all call this.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # XDG_RUNTIME_DIR fallback chatter
        import pgserver

        data_dir.mkdir(parents=True, exist_ok=True)
        return pgserver.get_server(data_dir / "pgdata", cleanup_mode="stop")


def has_embedded_database(data_dir: Path) -> bool:
    """Whether `data_dir` holds an embedded server's cluster (PG_VERSION marks an initdb'd one)."""
    return (data_dir / "pgdata" / "PG_VERSION").is_file()


def embedded_database_url(data_dir: Path) -> str:
    """The libpq URL of the embedded server, starting it when needed."""
    return str(start_embedded_postgres(data_dir).get_uri())
