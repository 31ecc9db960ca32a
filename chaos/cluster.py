"""A throwaway PostgreSQL cluster that only this harness uses (and restarts)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path
from typing import Any

from authsvc.migrate import upgrade


class ThrowawayPostgres:
    """pgserver's binaries on a fresh data folder; `restart()` is a real postmaster restart."""

    def __init__(self) -> None:
        # Short path: the Unix socket lives in the data folder (107-byte limit).
        self.root = Path(tempfile.mkdtemp(prefix="chaos-pg-", dir="/tmp"))
        self.root.chmod(0o755)  # pgserver runs postgres as its own user when we are root
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pgserver

            self._server: Any = pgserver.get_server(self.root / "pgdata", cleanup_mode="delete")
        self.url = str(self._server.get_uri())
        upgrade(self.url)
        self.restarts = 0

    def restart(self) -> None:
        """Stop the postmaster (fast: in-flight transactions abort) and start it again."""
        from pgserver._commands import pg_ctl  # type: ignore[attr-defined]  # generated names

        pg_ctl(["-w", "-m", "fast", "restart"], pgdata=self._server.pgdata,
               user=self._server.system_user, timeout=60)
        self.restarts += 1

    def close(self) -> None:
        # Stop it ourselves: after restart() pgserver still tracks the first
        # postmaster's pid, sees it gone, and would leave the new one running.
        from pgserver._commands import pg_ctl  # type: ignore[attr-defined]  # generated names

        try:
            pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self._server.pgdata,
                   user=self._server.system_user, timeout=60)
        except subprocess.CalledProcessError:
            pass  # already stopped
        self._server.cleanup()
        shutil.rmtree(self.root, ignore_errors=True)
