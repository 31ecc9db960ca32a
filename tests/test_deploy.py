"""docs/DEPLOY.md's steps that can run here, on the files in deploy/.

The units pass `systemd-analyze verify`; the example environment file names
every setting, fails `authsvc check` as shipped (placeholders) and passes it
filled in; the web app and the worker start with the units' own command
lines and that environment, serve and send, and stop cleanly on SIGTERM.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from authsvc.accounts import actions
from authsvc.cli import main
from testkit.waiting import free_port, wait_until, wait_until_ready
from tests.conftest import TEST_KEY
from tests.pages_support import make_account
from tests.worker_support import authsvc_command, stop_process

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
UNITS = ("authsvc-web.service", "authsvc-worker.service")
INSTALLED = "/opt/authsvc/.venv/bin/authsvc"
ENV_FILE = "/etc/authsvc/authsvc.env"


def environment_file(path: Path = DEPLOY / "authsvc.env.example") -> dict[str, str]:
    """KEY=value lines as systemd's EnvironmentFile= reads this file (no quotes used)."""
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition("=")
        assert sep and key == key.strip() and re.fullmatch(r"[A-Z_]+", key), line
        found[key] = value
    return found


def filled_in(env: dict[str, str], smtp_url: str, data_dir: Path) -> dict[str, str]:
    """The example with its CHANGE-ME values replaced, as step 4 asks."""
    shipped = environment_file()
    return {**shipped, "AUTHSVC_DATABASE_URL": env["AUTHSVC_DATABASE_URL"],
            "AUTHSVC_DIRECT_DATABASE_URL": env["AUTHSVC_DIRECT_DATABASE_URL"],
            "AUTHSVC_SECRET_KEYS": TEST_KEY, "AUTHSVC_MAIL_URL": smtp_url,
            "AUTHSVC_METRICS_TOKEN": "metrics-token-0123456789",
            "AUTHSVC_DATA_DIR": str(data_dir)}


def exec_start(unit: str) -> list[str]:
    [line] = [x for x in (DEPLOY / unit).read_text().splitlines() if x.startswith("ExecStart=")]
    argv = shlex.split(line.removeprefix("ExecStart="))
    assert argv[0] == INSTALLED
    return [*authsvc_command(), *argv[1:]]


def test_the_example_environment_names_every_setting():
    source = (ROOT / "authsvc" / "config.py").read_text(encoding="utf-8")
    settings = set(re.findall(r'"(AUTHSVC_[A-Z_]+)"', source))
    text = (DEPLOY / "authsvc.env.example").read_text(encoding="utf-8")
    assert sorted(s for s in settings if s not in text) == []


def test_the_example_as_shipped_fails_check_on_its_placeholders(env):
    result = CliRunner().invoke(main, ["check"], env={**env, **environment_file()})
    assert result.exit_code == 1
    assert "AUTHSVC_SECRET_KEYS" in result.output and "AUTHSVC_METRICS_TOKEN" in result.output
    assert "CHANGE-ME" not in result.output


def test_the_example_filled_in_passes_check(env, smtp, tmp_path):
    result = CliRunner().invoke(main, ["check"], env=filled_in(env, smtp.url, tmp_path))
    assert result.exit_code == 0, result.output
    assert "valid (production)" in result.output


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
@pytest.mark.parametrize("unit", UNITS)
def test_the_units_pass_systemd_analyze_verify(unit, tmp_path):
    # The unit as installed, pointed at this checkout's command and a scratch file.
    (tmp_path / "authsvc.env").write_text("AUTHSVC_ENV=production\n")
    text = (DEPLOY / unit).read_text().replace(INSTALLED, authsvc_command()[0]) \
        .replace(ENV_FILE, str(tmp_path / "authsvc.env"))
    (tmp_path / unit).write_text(text)
    done = subprocess.run(["systemd-analyze", "verify", str(tmp_path / unit)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stderr.strip() == "", done.stderr


@pytest.mark.e2e
def test_web_and_worker_start_as_the_units_start_them(env, smtp, conn, svc, tmp_path):
    settings = filled_in(env, smtp.url, tmp_path / "state")
    port = free_port()
    web_argv = [a.replace("127.0.0.1:8000", f"127.0.0.1:{port}") for a in
                exec_start("authsvc-web.service")]
    log = tmp_path / "units.log"
    with log.open("ab") as sink:
        # Only the environment file's variables, as systemd gives them (and PATH).
        unit_env = {**settings, "PATH": "/usr/bin:/bin"}
        web = subprocess.Popen(web_argv, env=unit_env, stdout=sink, stderr=sink, cwd=tmp_path)
        worker = subprocess.Popen(exec_start("authsvc-worker.service"), env=unit_env,
                                  stdout=sink, stderr=sink, cwd=tmp_path)
    try:
        wait_until_ready(f"http://127.0.0.1:{port}/readyz", web, output=log.read_text)
        make_account(conn, svc, "ann@example.com")
        actions.request_password_reset(conn, svc, email="ann@example.com")
        wait_until(lambda: any(m.subject == "Reset your password" for m in smtp.messages),
                   60, "the worker to send the reset")
    finally:
        codes = (stop_process(web, 30), stop_process(worker, 60))
    assert codes == (0, 0), log.read_text()[-3000:]
