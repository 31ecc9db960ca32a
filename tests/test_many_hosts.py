"""Many hosts (SPEC §11): 2 web and 2 worker "hosts" in network namespaces of their own.

Each host is a network namespace this test makes (`ip netns add`) with only
its own loopback: processes there reach the shared PostgreSQL and their
SMTP server through chaos/bridge.py (127.0.0.1:PORT inside the namespace
piped to a Unix socket), and the web processes answer on Unix sockets, so
no routable address is ever used. The first worker host is cut off (its
loopback taken down) the moment its SMTP server has accepted a message and
before the 250 reaches it: it can never record the send. Its lease expires,
the other host's worker re-claims the job and sends it again (the one
duplicate a crash after acceptance may cause), and every other job queued
through either web host is delivered exactly once: nothing lost.

Needs root and `ip` (iproute2); skips and says so elsewhere.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from email import message_from_bytes
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import UnixSocketController

from authsvc.apps.keys import register_app
from authsvc.db.connections import connect
from authsvc.db.migrate import upgrade
from chaos.servers import Postgres
from testkit.waiting import wait_until
from tests.conftest import TEST_KEY

pytestmark = pytest.mark.e2e
AUTHSVC = str(Path(sys.executable).parent / "authsvc")
LEASE_SECONDS = 4
JOBS = 20


def _namespaces_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    probe = f"authsvc-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "delete", probe], check=False)
    return None


class Host:
    """One network namespace with only a loopback, and the processes started in it."""

    def __init__(self, name: str, logs: Path) -> None:
        self.name = name
        self.logs = logs
        self.processes: list[subprocess.Popen[bytes]] = []
        subprocess.run(["ip", "netns", "add", name], check=True)
        self.ip("link", "set", "lo", "up")

    def ip(self, *args: str) -> None:
        subprocess.run(["ip", "netns", "exec", self.name, "ip", *args], check=True)

    def start(self, label: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = (self.logs / f"{self.name}-{label}.log").open("wb")
        process = subprocess.Popen(["ip", "netns", "exec", self.name, *argv], env=env,
                                   stdout=log, stderr=subprocess.STDOUT)
        self.processes.append(process)
        return process

    def cut_off(self) -> None:
        """The partition: nothing in this namespace reaches anything any more."""
        self.ip("link", "set", "lo", "down")

    def close(self) -> None:
        # Every process in the namespace, not only those we started: `authsvc serve`
        # killed outright would leave its gunicorn running.
        listed = subprocess.run(["ip", "netns", "pids", self.name], capture_output=True,
                                text=True, check=False).stdout.split()
        for pid in listed:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=10)
        subprocess.run(["ip", "netns", "delete", self.name], check=False)


class UnixHttp(http.client.HTTPConnection):
    """HTTP over the Unix socket a web host's gunicorn binds."""

    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=10)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(10)
        self.sock.connect(self.path)


def _request(path: str, method: str, url: str, body: dict[str, Any] | None = None,
             headers: dict[str, str] | None = None) -> int:
    conn = UnixHttp(path)
    try:
        conn.request(method, url, body=json.dumps(body) if body else None,
                     headers={"Content-Type": "application/json", **(headers or {})})
        return conn.getresponse().status
    except OSError:
        return 0
    finally:
        conn.close()


def _ready(path: str) -> bool:
    """The web host on Unix socket `path` answers its readiness probe."""
    return _request(path, "GET", "/readyz") == 200


class Receipts:
    """What each worker host's SMTP server accepted: (host, job Message-ID)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.got: list[tuple[str, str]] = []
        self.on_first: dict[str, Any] = {}

    def handler(self, host: str) -> Any:
        receipts = self

        class Handler:
            async def handle_DATA(self, _server: Any, _session: Any, envelope: Any) -> str:
                parsed = message_from_bytes(envelope.original_content or envelope.content)
                with receipts.lock:
                    receipts.got.append((host, str(parsed["Message-ID"])))
                    hook = receipts.on_first.pop(host, None)
                if hook is not None:
                    hook()  # accepted (stored) — and the host loses the network before the 250
                return "250 OK"

        return Handler()


@pytest.fixture
def hosts_unavailable() -> None:
    reason = _namespaces_unavailable()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def scratch() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="authsvc-hosts-", dir="/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_a_cut_off_worker_host_hands_its_job_to_the_other_host(hosts_unavailable, scratch):
    tag = uuid.uuid4().hex[:6]
    server = Postgres("hosts")
    hosts: list[Host] = []
    controllers: list[UnixSocketController] = []
    receipts = Receipts()
    try:
        socket_url = f"postgresql://postgres@/postgres?host={server.root}&port={server.port}"
        upgrade(socket_url)
        with connect(socket_url) as conn, conn.transaction():
            conn.execute("INSERT INTO users (email, password_hash) SELECT 'h' || n ||"
                         " '@hosts.test', 'not-a-hash' FROM generate_series(0, %s) n", (JOBS,))
            _app, api_key = register_app(conn, "hosts", ["http://127.0.0.1/"])
        base_env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(scratch),
            "AUTHSVC_ENV": "test", "AUTHSVC_SECRET_KEYS": TEST_KEY,
            "AUTHSVC_MAIL_FROM": "authsvc <no-reply@hosts.test>",
            "AUTHSVC_LEASE_SECONDS": str(LEASE_SECONDS),
            "AUTHSVC_RATE_LIMIT_APP": "100000/1m",
        }
        pg_socket = str(server.root / f".s.PGSQL.{server.port}")
        web_sockets = []
        for index in (1, 2):
            web = Host(f"authsvc-{tag}-web{index}", scratch)
            hosts.append(web)
            path = str(scratch / f"web{index}.sock")
            web_sockets.append(path)
            web.start("serve", [AUTHSVC, "serve", "--bind", f"unix:{path}", "--workers", "1"],
                      {**base_env, "AUTHSVC_DATA_DIR": str(scratch / f"web{index}"),
                       "AUTHSVC_DATABASE_URL": socket_url,
                       "AUTHSVC_DIRECT_DATABASE_URL": socket_url})
        workers = []
        for index in (1, 2):
            name = f"w{index}"
            smtp_path = str(scratch / f"smtp-{name}.sock")
            controller = UnixSocketController(receipts.handler(name), unix_socket=smtp_path)
            controller.start()
            controllers.append(controller)
            host = Host(f"authsvc-{tag}-{name}", scratch)
            hosts.append(host)
            # The host's own loopback: 5432 is the database, 2525 its mail relay.
            host.start("bridge", [sys.executable, "-m", "chaos.bridge", f"5432={pg_socket}",
                                  f"2525={smtp_path}"], dict(os.environ))
            workers.append(host)
        for path in web_sockets:
            wait_until(partial(_ready, path), timeout=60, what="a web host")
        local = "postgresql://postgres@127.0.0.1:5432/postgres"
        worker_env = {**base_env, "AUTHSVC_DATABASE_URL": local,
                      "AUTHSVC_DIRECT_DATABASE_URL": local, "AUTHSVC_SMTP_URL":
                      "smtp://127.0.0.1:2525"}
        w1, w2 = workers
        receipts.on_first["w1"] = w1.cut_off
        w1.start("worker", [AUTHSVC, "worker", "--poll-seconds", "0.5"],
                 {**worker_env, "AUTHSVC_DATA_DIR": str(scratch / "w1")})
        auth = {"Authorization": f"Bearer {api_key}"}
        first = _request(web_sockets[0], "POST", "/api/v1/password-resets",
                         {"email": "h0@hosts.test"}, {**auth, "Idempotency-Key": "first"})
        assert first == 202
        wait_until(lambda: receipts.got, timeout=30, what="w1's SMTP server accepting")
        cut_at = time.monotonic()
        w2.start("worker", [AUTHSVC, "worker", "--poll-seconds", "0.5"],
                 {**worker_env, "AUTHSVC_DATA_DIR": str(scratch / "w2")})
        for n in range(1, JOBS + 1):
            status = _request(web_sockets[n % 2], "POST", "/api/v1/password-resets",
                              {"email": f"h{n}@hosts.test"}, {**auth, "Idempotency-Key": f"k{n}"})
            assert status == 202, f"web{n % 2 + 1} answered {status}"

        def all_sent() -> bool:
            with connect(socket_url) as conn:
                row = conn.execute("SELECT count(*) FILTER (WHERE status = 'sent'), count(*)"
                                   " FROM email_jobs").fetchone()
            return row == (JOBS + 1, JOBS + 1)

        wait_until(all_sent, timeout=60, what="every job sent")
        handed_over_after = time.monotonic() - cut_at
        with connect(socket_url) as conn:
            first_job = conn.execute("SELECT min(id) FROM email_jobs").fetchone()[0]  # type: ignore[index]
            owners = conn.execute(
                "SELECT count(DISTINCT lease_owner) FROM email_job_events"
                " WHERE job_id = %s AND event = 'claimed'", (first_job,)
            ).fetchone()
            ids = [str(row[0]) for row in conn.execute("SELECT public_id FROM email_jobs")]
            first_public = str(conn.execute("SELECT public_id FROM email_jobs WHERE id = %s",
                                            (first_job,)).fetchone()[0])  # type: ignore[index]
        by_id: dict[str, list[str]] = {}
        for host_name, message_id in receipts.got:
            by_id.setdefault(message_id, []).append(host_name)
        expected = {f"<authsvc-job-{i}@hosts.test>" for i in ids}
        assert set(by_id) == expected, "a job was lost"
        first_id = f"<authsvc-job-{first_public}@hosts.test>"
        assert by_id[first_id] == ["w1", "w2"], "the cut-off host's job went to the other host"
        assert owners == (2,)
        assert all(hosts_ == ["w2"] for mid, hosts_ in by_id.items() if mid != first_id)
        assert handed_over_after >= LEASE_SECONDS - 1  # re-claimed only once the lease ran out
    finally:
        for host in hosts:
            host.close()
        for controller in controllers:
            controller.stop()
        server.close()
    assert not _left_running(scratch), "a host's process outlived the test"


def _left_running(scratch: Path) -> list[int]:
    """Processes still naming this test's folder (gunicorn binds its sockets there)."""
    import psutil

    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        if any(str(scratch) in part for part in process.info["cmdline"] or []):
            found.append(process.info["pid"])
    return found
