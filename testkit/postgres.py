"""A throwaway embedded PostgreSQL (pgserver) for harnesses that need a server of their own."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any


def throwaway_postgres(folder: Path) -> Any:
    """Start a server on `folder`/pgdata, deleted with its data by `handle.cleanup()`.

    Keep `folder` short: the Unix socket lives there (107-byte limit). When we run
    as root pgserver runs postgres as its own user, so the folder must be readable.
    """
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # XDG_RUNTIME_DIR fallback chatter
        import pgserver

        return pgserver.get_server(folder / "pgdata", cleanup_mode="delete")


def pg_ctl(server: Any, *args: str) -> None:
    """Run the embedded server's own pg_ctl (restart, stop) against its data folder."""
    from pgserver._commands import pg_ctl as run  # type: ignore[attr-defined]  # generated

    run(list(args), pgdata=server.pgdata, user=server.system_user, timeout=60)
