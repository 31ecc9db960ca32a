"""Throwaway server processes for the scale harnesses: PostgreSQL clusters and PgBouncer.

Each object starts its own process on a fresh folder under /tmp and a free
loopback port, and only ever stops (or promotes) the process it started:
never a server it did not start. PostgreSQL comes from pgserver's bundled
binaries (the same version the embedded server runs), so a fresh clone needs
nothing installed; PgBouncer is Debian's package (`make test-pgbouncer`
installs it when missing and root). Both refuse to run as root, so as root
they run as pgserver's unprivileged `pgserver` user.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg

from testkit.waiting import free_port

START_TIMEOUT_SECONDS = 60.0
# As pgserver does when root: postgres refuses to run as root.
SERVICE_USER = "pgserver"


def postgres_bin() -> Path:
    """pgserver's bundled PostgreSQL binaries."""
    from pgserver._commands import POSTGRES_BIN_PATH  # type: ignore[attr-defined]

    return Path(POSTGRES_BIN_PATH)


@dataclass(frozen=True)
class RunAs:
    """The user the server processes run as (None fields: ourselves)."""

    uid: int | None
    gid: int | None

    @classmethod
    def for_servers(cls) -> RunAs:
        if os.geteuid() != 0:
            return cls(None, None)
        try:
            entry = pwd.getpwnam(SERVICE_USER)
        except KeyError:
            subprocess.run(["useradd", "-s", "/bin/sh", SERVICE_USER], check=True,
                           capture_output=True)
            entry = pwd.getpwnam(SERVICE_USER)
        return cls(entry.pw_uid, entry.pw_gid)

    def own(self, path: Path) -> None:
        if self.uid is None or self.gid is None:
            return
        for folder, _dirs, files in os.walk(path):
            os.chown(folder, self.uid, self.gid)
            for name in files:
                os.chown(os.path.join(folder, name), self.uid, self.gid)

    def run(self, argv: list[str], *, timeout: float = START_TIMEOUT_SECONDS) -> None:
        result = subprocess.run(argv, user=self.uid, group=self.gid, capture_output=True,
                                text=True, timeout=timeout, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"{Path(argv[0]).name} failed ({result.returncode}): "
                               f"{result.stderr.strip() or result.stdout.strip()}")


def _scratch(prefix: str, run_as: RunAs) -> Path:
    # Short: the server's Unix socket lives inside (107-byte limit).
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    root.chmod(0o755)
    run_as.own(root)
    return root


class Postgres:
    """One PostgreSQL cluster on 127.0.0.1:`port`: a fresh primary, or a streaming standby."""

    def __init__(self, name: str = "pg", *, standby_of: Postgres | None = None,
                 max_connections: int = 300) -> None:
        self.run_as = RunAs.for_servers()
        self.bin = postgres_bin()
        self.root = _scratch(f"authsvc-{name}-", self.run_as)
        self.data = self.root / "data"
        self.port = free_port()
        self.started = False
        if standby_of is None:
            self.run_as.run([str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres",
                             "--auth=trust", "-E", "UTF8", "--no-instructions"])
            self._configure(
                max_connections=str(max_connections),
                wal_level="replica", max_wal_senders="5", hot_standby="on",
                fsync="off", full_page_writes="off",
            )
        else:
            # -R writes standby.signal and primary_conninfo: a streaming standby.
            self.run_as.run([str(self.bin / "pg_basebackup"), "-h", "127.0.0.1",
                             "-p", str(standby_of.port), "-U", "postgres", "-D",
                             str(self.data), "-R", "-X", "stream", "-c", "fast"])
            self._configure()
        self.start()

    def _configure(self, **settings: str) -> None:
        lines = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.root}'",
            **settings,
        }
        with (self.data / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write("\n# chaos.servers\n")
            conf.writelines(f"{key} = {value}\n" for key, value in lines.items())

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def _pg_ctl(self, *args: str, timeout: float = START_TIMEOUT_SECONDS) -> None:
        self.run_as.run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-w",
                         "-t", str(int(timeout)), *args], timeout=timeout + 5)

    def start(self) -> None:
        self._pg_ctl("-l", str(self.root / "server.log"), "start")
        self.started = True

    def stop(self, mode: str = "fast") -> None:
        """Stop this cluster: `fast` aborts open transactions, `immediate` is a crash."""
        if self.started:
            self._pg_ctl("-m", mode, "stop")
            self.started = False

    def promote(self) -> None:
        """Make this standby a primary (pg_ctl promote waits until it accepts writes)."""
        self._pg_ctl("promote")

    def in_recovery(self) -> bool:
        with psycopg.connect(self.url(), autocommit=True, connect_timeout=5) as conn:
            row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
        return bool(row and row[0])

    def close(self) -> None:
        try:
            self.stop("immediate")
        except (RuntimeError, subprocess.TimeoutExpired):
            pass  # already gone
        shutil.rmtree(self.root, ignore_errors=True)


class PgBouncer:
    """Debian's PgBouncer in transaction mode in front of one PostgreSQL, on its own port."""

    def __init__(self, server_host: str, server_port: int, *, pool_size: int = 20) -> None:
        binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
        if not Path(binary).exists():
            raise FileNotFoundError("pgbouncer is not installed (apt-get install pgbouncer)")
        self.run_as = RunAs.for_servers()
        self.root = _scratch("authsvc-pgb-", self.run_as)
        self.port = free_port()
        users = self.root / "users.txt"
        users.write_text('"postgres" ""\n', encoding="utf-8")
        ini = self.root / "pgbouncer.ini"
        # `*`: every database name maps to the same-named database on the server,
        # so per-test databases need no configuration.
        ini.write_text(
            "[databases]\n"
            f"* = host={server_host} port={server_port}\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {self.port}\n"
            "unix_socket_dir =\n"
            "auth_type = trust\n"
            f"auth_file = {users}\n"
            "pool_mode = transaction\n"
            "max_client_conn = 2000\n"
            f"default_pool_size = {pool_size}\n"
            # psycopg sends these at connect; PgBouncer must not refuse them.
            "ignore_startup_parameters = extra_float_digits,options\n"
            # A client waiting for a server connection fails after this many
            # seconds instead of the default 120, so an outage behind the pooler
            # surfaces as the web side's 503 within seconds.
            "query_wait_timeout = 5\n"
            f"logfile = {self.root / 'pgbouncer.log'}\n",
            encoding="utf-8",
        )
        self.run_as.own(self.root)
        self.process = subprocess.Popen(
            [binary, str(ini)], user=self.run_as.uid, group=self.run_as.gid,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            if self.process.poll() is not None:
                log = (self.root / "pgbouncer.log").read_text("utf-8", "replace")[-2000:]
                raise RuntimeError(f"pgbouncer exited with {self.process.returncode}: {log}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("pgbouncer did not start listening") from None
                time.sleep(0.05)

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.root, ignore_errors=True)
