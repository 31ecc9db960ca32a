"""`authsvc dev` as a user runs it: a real process tree, stopped by SIGTERM or Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import signal
import smtplib
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from testkit.waiting import free_port, free_ports, http_status, wait_until
from tests.conftest import TEST_KEY

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parent.parent


@dataclass
class Dev:
    process: subprocess.Popen[bytes]
    port: int
    smtp_port: int
    data_dir: Path
    output: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def printed(self) -> str:
        """What it printed: stdout (the banner), then stderr (JSON lines)."""
        return self.output.read_text(errors="replace") + self.errors().read_text(errors="replace")

    def errors(self) -> Path:
        return self.output.with_suffix(".err")


def _ready(dev: Dev) -> bool:
    assert dev.process.poll() is None, f"authsvc dev exited early:\n{dev.printed()[-3000:]}"
    if "Press Ctrl-C to stop." not in dev.printed():
        return False
    if http_status(f"{dev.url}/readyz") != 200:
        return False
    try:
        with smtplib.SMTP("127.0.0.1", dev.smtp_port, timeout=2) as client:
            return client.noop()[0] == 250
    except OSError:
        return False


@contextmanager
def running_dev(tmp_path: Path, env: dict[str, str]) -> Iterator[Dev]:
    """Start `authsvc dev` on free ports and wait until it serves HTTP and SMTP."""
    port, smtp_port = free_ports(2)
    output = tmp_path / f"dev-{port}.log"
    with output.open("wb") as sink, output.with_suffix(".err").open("wb") as errors:
        process = subprocess.Popen(
            [sys.executable, "-m", "authsvc.cli", "dev", "--port", str(port),
             "--smtp-port", str(smtp_port)],
            env={**os.environ, **env}, cwd=tmp_path, stdout=sink, stderr=errors,
            start_new_session=True,  # its own group, as a terminal gives a foreground job
        )
    dev = Dev(process, port, smtp_port, Path(env["AUTHSVC_DATA_DIR"]), output)
    try:
        wait_until(lambda: _ready(dev), timeout=90, what="authsvc dev to be ready")
        yield dev
    finally:
        if process.poll() is None:  # a failed test: stop it the way a user would
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)


def _process_tree(dev: Dev) -> list[psutil.Process]:
    """Every process of this dev stack, the embedded PostgreSQL included."""
    tree = [psutil.Process(dev.process.pid), *psutil.Process(dev.process.pid).children(True)]
    pid_file = dev.data_dir / "pgdata" / "postmaster.pid"
    if pid_file.exists():
        postmaster = psutil.Process(int(pid_file.read_text().split()[0]))
        tree += [postmaster, *postmaster.children(True)]
    return tree


def _stop_and_check_nothing_left(dev: Dev, signum: int, *, to_group: bool) -> None:
    tree = _process_tree(dev)
    assert len(tree) >= 4  # dev, gunicorn master and workers, worker, sink
    if to_group:
        os.killpg(dev.process.pid, signum)  # what Ctrl-C does to a foreground job
    else:
        dev.process.send_signal(signum)
    assert dev.process.wait(timeout=40) == 0, dev.printed()[-3000:]
    _gone, alive = psutil.wait_procs(tree, timeout=10)
    assert alive == [], f"left running: {[(p.pid, p.cmdline()) for p in alive]}"
    for port in (dev.port, dev.smtp_port):
        with socket.socket() as probe, pytest.raises(OSError):
            probe.settimeout(1)
            probe.connect(("127.0.0.1", port))


def _printed_key(dev: Dev) -> str:
    match = re.search(r"dev app key\s+(\S+)", dev.printed())
    assert match, dev.printed()[-3000:]
    return match.group(1)


@pytest.fixture
def embedded_env(tmp_path: Path) -> dict[str, str]:
    """No database URL: `authsvc dev` starts the embedded PostgreSQL itself."""
    return {
        "AUTHSVC_ENV": "development",
        "AUTHSVC_DATA_DIR": str(tmp_path / ".authsvc"),
        "AUTHSVC_SECRET_KEYS": TEST_KEY,
        "AUTHSVC_DATABASE_URL": "",
    }


def test_sigterm_and_ctrl_c_stop_everything_and_the_key_survives_restarts(tmp_path, embedded_env):
    with running_dev(tmp_path, embedded_env) as dev:
        key_file = dev.data_dir / "dev-app-key"
        key = _printed_key(dev)
        assert key_file.read_text() == key + "\n"
        assert (dev.data_dir / "pgdata" / "postmaster.pid").exists()
        _stop_and_check_nothing_left(dev, signal.SIGTERM, to_group=False)
        assert not (dev.data_dir / "pgdata" / "postmaster.pid").exists()

    with running_dev(tmp_path, embedded_env) as again:
        assert _printed_key(again) == key
        assert key_file.read_text() == key + "\n"
        _stop_and_check_nothing_left(again, signal.SIGINT, to_group=True)
    # Every process of the stack, the embedded PostgreSQL's start included: JSON lines.
    for run in (dev, again):
        lines = run.errors().read_text().splitlines()
        events = [json.loads(line)["event"] for line in lines]
        assert "embedded_database_starting" in events and events[-1] == "dev_stopped"


def _block(path: Path, name: str) -> str:
    """The fenced shell block between <!-- NAME:start --> and <!-- NAME:end --> in `path`."""
    text = path.read_text()
    block = text.split(f"<!-- {name}:start -->")[1].split(f"<!-- {name}:end -->")[0]
    return re.sub(r"^```\w*\n|```$", "", block.strip(), flags=re.M)


def _walkthrough() -> str:
    return _block(REPO / "docs" / "inbox.md", "walkthrough")


def _pasted(block: str, cwd: Path, dev: Dev | None) -> list[str]:
    """What a docs shell block prints, run as pasted, with $AUTHSVC naming `dev` for the
    blocks that say to set it (None: a block that stands alone); it must pass."""
    named = {"AUTHSVC": dev.url} if dev else {}
    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block],
        cwd=cwd, env={**os.environ, **named},
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.splitlines()


def test_walkthrough_passes_verbatim_against_authsvc_dev(tmp_path, env):
    dev_env = {**env, "AUTHSVC_DATA_DIR": str(tmp_path / ".authsvc")}
    with running_dev(tmp_path, dev_env) as dev:
        lines = _pasted(_walkthrough(), tmp_path, dev)
        assert lines[0] == '{"status":"verification_sent"}'
        assert lines[2].endswith('"verified":true}')
        assert lines[3] == '{"status":"accepted"}'
        assert lines[5] == '{"status":"password_changed"}'
        assert '"email_verified":true' in lines[6]

        # The README's short block, pasted twice: the second run must work as well
        # (a fixed Idempotency-Key made it 422 idempotency_key_reused).
        quick = _block(REPO / "README.md", "quick-api").replace("http://127.0.0.1:8000", dev.url)
        for run in (1, 2):
            said = _pasted(quick, tmp_path, None)
            assert said[0] == '{"status":"verification_sent"}', (run, said)
            assert "/verify?token=" in said[1] and said[2] == '{"status":"accepted"}', said

        # docs/api.md's address change, undo and deletion, as written.
        said = _pasted(_block(REPO / "docs" / "api.md", "address-life"), tmp_path, dev)
        assert said[0] == '{"status":"verification_sent"}', said
        assert said[2].endswith('"verified":true}'), said
        assert said[3] == '{"status":"confirmation_sent"}', said
        assert said[4].startswith("to ann.new+") and said[4].endswith(
            "Confirm your new email address"), said
        assert said[5].startswith('{"email":"ann.new+') and '"previous_email":"ann+' in said[5]
        assert said[6].startswith("to ann+"), said
        assert said[6].endswith("Your account's email address was changed"), said
        assert said[7].startswith('{"email":"ann+'), said
        assert said[8].endswith("This address no longer signs in to your account"), said
        assert said[9] == '{"status":"confirmation_sent"}', said
        assert said[10].endswith("Confirm deleting your account"), said
        assert said[11:] == ['{"deleted":true}', "invalid_credentials"], said

        # docs/api.md's sign-in by email, as written.
        said = _pasted(_block(REPO / "docs" / "api.md", "sign-in"), tmp_path, dev)
        assert said[0] == '{"status":"verification_sent"}', said
        assert said[1].endswith("Confirm your email address"), said
        assert said[2] == '{"status":"accepted"}' and said[3].endswith("Your sign-in link"), said
        assert said[4].startswith('{"created":true,"user":{"email":"ann+'), said
        assert said[5] == "invalid_credentials", said
        assert said[6] == '{"status":"accepted"}' and said[7].endswith("Your sign-in link"), said
        assert said[8].startswith('{"created":false,"user":{"email":"ann+'), said

        # /metrics counts what both gunicorn workers answered, as under `authsvc serve`.
        before = _healthz_count(dev)
        for _ in range(12):  # a new connection each: either worker may answer
            assert http_status(f"{dev.url}/healthz") == 200
        assert _healthz_count(dev) == before + 12
        assert list((dev.data_dir / "prometheus-multiproc").glob("counter_*.db"))
        dev.process.send_signal(signal.SIGTERM)
        assert dev.process.wait(timeout=40) == 0


def _healthz_count(dev: Dev) -> float:
    with urllib.request.urlopen(f"{dev.url}/metrics", timeout=10) as reply:  # noqa: S310
        body = reply.read().decode()
    series = 'authsvc_http_requests_total{method="GET",route="/healthz",status="200"} '
    return sum(float(line.removeprefix(series)) for line in body.splitlines()
               if line.startswith(series))


def test_production_refuses_to_start(tmp_path, env):
    production = {
        **env, "AUTHSVC_ENV": "production", "AUTHSVC_BASE_URL": "https://auth.example",
        "AUTHSVC_SMTP_URL": "smtp://mail.example:25",
    }
    port = free_port()
    result = subprocess.run(
        [sys.executable, "-m", "authsvc.cli", "dev", "--port", str(port)],
        env={**os.environ, **production}, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode != 0
    assert "AUTHSVC_TEST_INBOX: the test inbox is refused in production" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "data" / "dev-app-key").exists()


def test_port_in_use_is_reported_before_anything_starts(tmp_path, env):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "authsvc.cli", "dev", "--port", str(port)],
            env={**os.environ, **env}, capture_output=True, text=True, timeout=60,
        )
    assert result.returncode != 0
    assert f"port {port} is already in use" in result.stderr
    assert not (Path(env["AUTHSVC_DATA_DIR"]) / "dev-app-key").exists()


def test_the_same_port_for_http_and_smtp_is_refused_up_front(tmp_path, env):
    port = free_port()
    result = subprocess.run(
        [sys.executable, "-m", "authsvc.cli", "dev", "--port", str(port), "--smtp-port", str(port)],
        env={**os.environ, **env}, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode != 0
    assert "--port and --smtp-port must differ" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (Path(env["AUTHSVC_DATA_DIR"]) / "dev-app-key").exists()


def test_dev_keeps_mail_in_the_sandbox_whatever_mail_url_says(monkeypatch):
    """A provider URL in the shell (AUTHSVC_MAIL_URL) must not send real mail from `dev`."""
    from authsvc.cli.dev import _dev_environment

    monkeypatch.setenv("AUTHSVC_MAIL_URL", "resend://re_live_key@api.resend.com")
    env = _dev_environment(8000, 2525)
    assert env["AUTHSVC_MAIL_URL"] == env["AUTHSVC_SMTP_URL"] == "smtp://127.0.0.1:2525"


def test_dev_metrics_are_one_set_across_the_web_workers(tmp_path, env):
    """As under `authsvc serve`: gunicorn's workers write where any worker's /metrics reads."""
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    series = 'authsvc_http_requests_total{method="GET",route="/healthz",status="200"}'

    def fetch(path: str) -> str:
        request = urllib.request.Request(dev.url + path, headers={"Connection": "close"})  # noqa: S310
        with urllib.request.urlopen(request, timeout=5) as reply:  # noqa: S310 (loopback)
            return str(reply.read().decode())

    with running_dev(tmp_path, env) as dev:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda _i: fetch("/healthz"), range(40)))
        body = fetch("/metrics")
        found = re.search(rf"^{re.escape(series)} (\S+)$", body, re.MULTILINE)
        assert found is not None and float(found.group(1)) == 40, body[-2000:]
        assert list((dev.data_dir / "prometheus-multiproc").glob("counter_*.db"))
