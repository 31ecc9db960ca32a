"""`authsvc dev`: the whole stack on one machine, stopped cleanly by Ctrl-C or SIGTERM."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from urllib.error import URLError
from urllib.request import urlopen

import click

from authsvc.apps.keys import find_app_by_key, register_app
from authsvc.cli.serve import gunicorn_argv, prepare_multiprocess_dir
from authsvc.cli.startup import database_url_or_exit
from authsvc.config import ConfigError, Settings, load_settings
from authsvc.db.connections import connect
from authsvc.db.migrate import upgrade
from authsvc.observability.logs import configure_logging, log_event

READY_TIMEOUT_SECONDS = 60.0
STOP_GRACE_SECONDS = 15.0
DEV_APP_NAME = "dev"
DEV_RETRY_SECONDS = 1.0  # the dev worker's first retry: 1-1.5 s, then doubling

logger = logging.getLogger(__name__)


def ensure_dev_app(database_url: str, settings: Settings) -> str:
    """The dev app's API key: reused from <data dir>/dev-app-key while the database knows it."""
    key_file = settings.data_dir / "dev-app-key"
    with connect(database_url) as conn:
        if key_file.exists():
            key = key_file.read_text(encoding="utf-8").strip()
            if find_app_by_key(conn, key) is not None:
                return key
        with conn.transaction():
            _app, key = register_app(conn, DEV_APP_NAME, [settings.base_url])
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    partial = key_file.with_suffix(".tmp")
    partial.write_text(key + "\n", encoding="utf-8")
    partial.chmod(0o600)
    partial.replace(key_file)  # never a half-written key file
    return key


def _port_taken(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _free_port() -> int:
    """A loopback port nothing listens on now, for gunicorn behind the inbox server."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _http_ready(url: str) -> bool:
    try:
        with urlopen(url, timeout=2) as response:  # noqa: S310 - our own http URL
            return bool(response.status == 200)
    except (URLError, OSError):
        return False


def _smtp_ready(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
            return conn.recv(4).startswith(b"220")
    except OSError:
        return False


def _terminate_with_parent() -> None:
    """In the child: get SIGTERM if `authsvc dev` dies without cleaning up (Linux only)."""
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGTERM)


class Stack:
    """The child processes of `authsvc dev`, each in its own process group."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.children: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, argv: list[str], extra_env: dict[str, str] | None = None) -> None:
        # A new session per child: Ctrl-C in the terminal reaches only this
        # process, which then stops the children in order and waits for them.
        self.children[name] = subprocess.Popen(
            argv, env={**self.env, **(extra_env or {})}, start_new_session=True,
            preexec_fn=_terminate_with_parent,
        )

    def exited(self) -> list[tuple[str, int]]:
        """Children that are no longer running, with their exit codes."""
        return [(n, c.returncode) for n, c in self.children.items() if c.poll() is not None]

    def stop(self, grace_seconds: float = STOP_GRACE_SECONDS) -> None:
        """SIGTERM each child, wait (bounded), then SIGKILL whatever is left in its group."""
        # The leader alone: gunicorn's master shuts its own workers down in order.
        for child in self.children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_seconds
        for child in self.children.values():
            try:
                child.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        # Group members (gunicorn's workers) may outlive their leader.
        for child in self.children.values():
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            child.wait()


def _dev_environment(port: int, smtp_port: int) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("AUTHSVC_BASE_URL", f"http://127.0.0.1:{port}")
    # Forced, not defaulted: `authsvc dev` is a sandbox, so no mail leaves the machine.
    env["AUTHSVC_TEST_INBOX"] = "on"
    # Both names: a provider URL under either one must not reach the sandbox.
    env["AUTHSVC_MAIL_URL"] = env["AUTHSVC_SMTP_URL"] = f"smtp://127.0.0.1:{smtp_port}"
    return env


def _wait_until_ready(stack: Stack, stop: threading.Event, port: int, smtp_port: int) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while not stop.is_set():
        if stack.exited():
            name, code = stack.exited()[0]
            raise click.ClickException(f"the {name} process exited with code {code} at start-up")
        if _http_ready(f"http://127.0.0.1:{port}/readyz") and _smtp_ready(smtp_port):
            return
        if time.monotonic() > deadline:
            limit = f"{READY_TIMEOUT_SECONDS:g} s"
            raise click.ClickException(f"the stack was not ready within {limit}")
        stop.wait(0.2)


def _banner(settings: Settings, port: int, smtp_port: int, key: str) -> str:
    web = f"http://127.0.0.1:{port}"
    return "\n".join([
        "authsvc dev is running",
        f"  web app      {web}  (base URL {settings.base_url})",
        f"  JSON API     {web}/api/v1",
        f"  test inbox   {web}/_inbox",
        f"  SMTP sink    127.0.0.1:{smtp_port}  (mail for @{settings.test_inbox_domain})",
        f"  dev app key  {key}",
        f"               (also in {settings.data_dir / 'dev-app-key'})",
        "Press Ctrl-C to stop.",
    ])


@click.command()
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--smtp-port", type=click.IntRange(1, 65535), default=2525, show_default=True)
def dev(port: int, smtp_port: int) -> None:
    """Run the whole stack here: database, migrations, web app, worker and test inbox."""
    if port == smtp_port:
        raise click.ClickException(f"--port and --smtp-port must differ (both are {port})")
    # Before the settings: loading them writes the dev secret key into the
    # data dir, and a refused start must leave the data dir as it was.
    for taken in (p for p in (port, smtp_port) if _port_taken(p)):
        flag = "--port" if taken == port else "--smtp-port"
        raise click.ClickException(f"port {taken} is already in use; pick another with {flag}")
    # Its own lines are JSON on stderr like every child's; the banner is stdout.
    configure_logging()
    env = _dev_environment(port, smtp_port)
    try:
        settings = load_settings(env)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda _signum, _frame: stop.set())

    stack = Stack(env)
    try:
        if not settings.database_url:
            pgdata = str(settings.data_dir / "pgdata")
            log_event(logger, "embedded_postgres_starting", pgdata=pgdata)
        # The embedded server, if started here, stops when this process exits
        # and no other process uses it (pgserver's own exit hook).
        url = database_url_or_exit(settings, create=True)
        if not settings.database_url:
            # No pooler in front of the embedded server: the children may LISTEN on it.
            env["AUTHSVC_DIRECT_DATABASE_URL"] = url
        env["AUTHSVC_DATABASE_URL"] = url
        env["AUTHSVC_DATA_DIR"] = str(settings.data_dir)
        upgrade(url)  # driver errors: one line, from the `authsvc` group's boundary
        key = ensure_dev_app(url, settings)

        cli = [sys.executable, "-m", "authsvc.cli"]
        # The inbox's HTTP server owns the public port: it serves /_inbox itself
        # (a long poll is a parked coroutine, not a gunicorn thread) and forwards
        # every other path to gunicorn.
        web_port = _free_port()
        # As `authsvc serve` does: every gunicorn worker writes its metrics
        # where any worker's /metrics reads them all, so a scrape is the sum.
        # The web app's alone: the worker and the inbox keep their own.
        metrics_dir = settings.metrics_multiproc_dir or settings.data_dir / "prometheus-multiproc"
        stack.start("web", gunicorn_argv(f"127.0.0.1:{web_port}", workers=2, threads=16),
                    {"PROMETHEUS_MULTIPROC_DIR": str(prepare_multiprocess_dir(metrics_dir))})
        stack.start(
            "inbox",
            [
                *cli, "inbox", "--port", str(smtp_port), "--http-port", str(port),
                "--upstream", f"http://127.0.0.1:{web_port}",
            ],
        )
        # A sandbox retries a refused delivery within seconds (not 30 s), so that QA can
        # watch a fault on demand turn into exactly one email (docs/inbox.md).
        stack.start("worker", [*cli, "worker", "--retry-base-seconds", str(DEV_RETRY_SECONDS)])
        _wait_until_ready(stack, stop, port, smtp_port)
        if not stop.is_set():
            click.echo(_banner(settings, port, smtp_port, key))
        while not stop.wait(0.5):
            if stack.exited():
                name, code = stack.exited()[0]
                raise click.ClickException(f"the {name} process exited with code {code}; stopping")
    finally:
        log_event(logger, "dev_stopping")
        stack.stop()
    log_event(logger, "dev_stopped")
