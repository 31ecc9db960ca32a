"""A throwaway PostgreSQL cluster that only this harness uses (and restarts)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from authsvc.db.migrate import upgrade
from testkit.postgres import pg_ctl, throwaway_postgres


class ThrowawayPostgres:
    """pgserver's binaries on a fresh data folder; `restart()` is a real postmaster restart."""

    def __init__(self) -> None:
        # Short path: the Unix socket lives in the data folder (107-byte limit).
        self.root = Path(tempfile.mkdtemp(prefix="chaos-pg-", dir="/tmp"))
        self._server: Any = throwaway_postgres(self.root)
        self.url = str(self._server.get_uri())
        upgrade(self.url)
        self.restarts = 0

    def restart(self) -> None:
        """Stop the postmaster (fast: in-flight transactions abort) and start it again."""
        pg_ctl(self._server, "-w", "-m", "fast", "restart")
        self.restarts += 1

    def close(self) -> None:
        # Stop it ourselves: after restart() pgserver still tracks the first
        # postmaster's pid, sees it gone, and would leave the new one running.
        try:
            pg_ctl(self._server, "-w", "-m", "fast", "stop")
        except subprocess.CalledProcessError:
            pass  # already stopped
        self._server.cleanup()
        shutil.rmtree(self.root, ignore_errors=True)
