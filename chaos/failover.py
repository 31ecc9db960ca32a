"""A primary and a streaming standby of our own, and a failover between them mid-run.

`python -m chaos --failover` uses this instead of chaos.cluster's single
server: the primary is initdb'd, the standby made from it with
`pg_basebackup -R`, replication is synchronous (so a commit the API
answered 202 for is on the standby too), and every process gets one libpq
URL naming both hosts with `target_session_attrs=read-write`, so a
reconnect lands on whichever is the primary now. `restart()` is the fault the
schedule injects once: the primary crashes (immediate stop, never started
again) and the standby is promoted. Only the two servers made here are
ever stopped or promoted.
"""

from __future__ import annotations

import psycopg

from authsvc.db.migrate import upgrade
from chaos.servers import Postgres


class FailoverPair:
    """Primary + synchronous standby; `url` follows the primary across a failover."""

    def __init__(self) -> None:
        self.primary = Postgres("primary")
        self.standby = Postgres("standby", standby_of=self.primary)
        with psycopg.connect(self.primary.url(), autocommit=True) as conn:
            # Set after the base backup, so the standby does not wait for a standby itself.
            conn.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
            conn.execute("SELECT pg_reload_conf()")
        hosts = "127.0.0.1,127.0.0.1"
        ports = f"{self.primary.port},{self.standby.port}"
        # libpq tries the hosts in order and keeps the first that accepts writes.
        self.url = (f"postgresql://postgres@/postgres?host={hosts}&port={ports}"
                    "&target_session_attrs=read-write&connect_timeout=3")
        upgrade(self.url)
        self.restarts = 0  # the schedule's name for "the database fault happened"
        self.failovers = 0

    def restart(self) -> None:
        """Crash the primary and promote the standby: the failover."""
        self.primary.stop("immediate")
        self.standby.promote()
        self.failovers += 1
        self.restarts += 1

    def close(self) -> None:
        self.standby.close()
        self.primary.close()
