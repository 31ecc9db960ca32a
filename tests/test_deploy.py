"""deploy/: the systemd units and the environment file docs/DEPLOY.md installs, run here."""

from __future__ import annotations

import json
import re
import secrets
import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from authsvc.cli import main
from authsvc.config import ConfigError, load_settings
from testkit.smtp_double import SmtpDouble
from testkit.waiting import free_port, http_status, wait_until

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
UNITS = ("authsvc-web.service", "authsvc-worker.service")
INSTALLED_AUTHSVC = "/opt/authsvc/venv/bin/authsvc"
INSTALLED_ENV_FILE = "/etc/authsvc/authsvc.env"
AUTHSVC = str(Path(sys.executable).parent / "authsvc")
# Read by the service but not for production: the dev test inbox, and the legacy name
# of AUTHSVC_MAIL_URL.
NOT_FOR_PRODUCTION = {"AUTHSVC_TEST_INBOX", "AUTHSVC_TEST_INBOX_DOMAIN",
                      "AUTHSVC_TEST_INBOX_MAX_BYTES", "AUTHSVC_TEST_INBOX_TOKEN",
                      "AUTHSVC_SMTP_URL"}


def environment_file(path: Path) -> dict[str, str]:
    """NAME=value lines as systemd's EnvironmentFile= reads them (no quotes used here)."""
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip()
    return values


def exec_start(unit: str) -> list[str]:
    """The unit's ExecStart=, with the installed authsvc replaced by this checkout's."""
    line = next(line for line in (DEPLOY / unit).read_text().splitlines()
                if line.startswith("ExecStart="))
    return [AUTHSVC if word == INSTALLED_AUTHSVC else word
            for word in line.removeprefix("ExecStart=").split()]


def unit_environment(unit: str) -> dict[str, str]:
    return dict(line.removeprefix("Environment=").split("=", 1)
                for line in (DEPLOY / unit).read_text().splitlines()
                if line.startswith("Environment="))


def real_secrets() -> dict[str, str]:
    return {"AUTHSVC_SECRET_KEYS": secrets.token_urlsafe(48),
            "AUTHSVC_METRICS_TOKEN": secrets.token_urlsafe(24)}


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_the_units_pass_systemd_analyze_verify_without_a_warning(tmp_path: Path) -> None:
    env_file = tmp_path / "authsvc.env"
    env_file.write_text("")
    installed = []
    for unit in UNITS:
        text = (DEPLOY / unit).read_text()
        assert INSTALLED_AUTHSVC in text and INSTALLED_ENV_FILE in text
        (tmp_path / unit).write_text(text.replace(INSTALLED_AUTHSVC, AUTHSVC)
                                     .replace(INSTALLED_ENV_FILE, str(env_file)))
        installed.append(str(tmp_path / unit))
    # systemd-analyze exits 0 on a value it ignores; a warning on stderr is the failure.
    checked = subprocess.run(["systemd-analyze", "verify", "--man=no", *installed],
                             capture_output=True, text=True, timeout=60, check=False)
    assert (checked.returncode, checked.stdout, checked.stderr) == (0, "", "")


def test_the_example_environment_is_refused_until_its_secrets_are_real() -> None:
    example = environment_file(DEPLOY / "authsvc.env.example")
    with pytest.raises(ConfigError) as caught:
        load_settings(example)
    assert [p.split(":")[0] for p in caught.value.problems] == [
        "AUTHSVC_SECRET_KEYS", "AUTHSVC_METRICS_TOKEN"]
    settings = load_settings({**example, **real_secrets()})
    assert settings.production and settings.base_url.startswith("https://")
    assert settings.trusted_proxies == 1  # one proxy: deploy/nginx.conf


def test_the_example_as_shipped_fails_check_on_its_placeholders(env: dict[str, str]) -> None:
    example = environment_file(DEPLOY / "authsvc.env.example")
    result = CliRunner().invoke(main, ["check"], env={**env, **example})
    assert result.exit_code == 1
    assert "AUTHSVC_SECRET_KEYS" in result.output and "AUTHSVC_METRICS_TOKEN" in result.output
    assert "CHANGE-ME" not in result.output  # no value is printed back


def test_the_example_filled_in_passes_check(
    env: dict[str, str], smtp: SmtpDouble, tmp_path: Path
) -> None:
    """Step 5 of docs/DEPLOY.md: after `db upgrade`, every line of `authsvc check` passes."""
    filled = {**env, **environment_file(DEPLOY / "authsvc.env.example"), **real_secrets(),
              "AUTHSVC_DATABASE_URL": env["AUTHSVC_DATABASE_URL"],
              "AUTHSVC_DIRECT_DATABASE_URL": env["AUTHSVC_DIRECT_DATABASE_URL"],
              "AUTHSVC_MAIL_URL": smtp.url, "AUTHSVC_DATA_DIR": str(tmp_path)}
    result = CliRunner().invoke(main, ["check"], env=filled)
    assert result.exit_code == 0, result.output
    assert "valid (production)" in result.output


def test_the_example_names_every_setting_production_reads() -> None:
    read = set(re.findall(r'"(AUTHSVC_[A-Z_]+)"', (ROOT / "authsvc/config.py").read_text()))
    example = (DEPLOY / "authsvc.env.example").read_text()
    named = set(re.findall(r"^#?(AUTHSVC_[A-Z_]+)=", example, re.MULTILINE))
    assert read - NOT_FOR_PRODUCTION - named == set()
    assert named - read == set(), "the example names a setting the service does not read"


def _first_operator(env: dict[str, str], base: str, api_key: str, email_text: str) -> None:
    """Step 8 of docs/DEPLOY.md: `operators add` takes the account once it is confirmed."""
    def operators_add() -> subprocess.CompletedProcess[str]:
        return subprocess.run([AUTHSVC, "operators", "add", "first@example.com"], env=env,
                              capture_output=True, text=True, timeout=60, check=False)

    unconfirmed = operators_add()
    assert unconfirmed.returncode == 1 and "not confirmed yet" in unconfirmed.stderr
    token = re.search(r"/verify\?token=([^\s&]+)", email_text)
    assert token, email_text
    request = urllib.request.Request(  # noqa: S310 (loopback)
        base + "/api/v1/verifications/confirm", method="POST",
        data=json.dumps({"token": token.group(1)}).encode(),
        headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/json",
                 "X-Forwarded-For": "198.51.100.7"})
    with urllib.request.urlopen(request, timeout=30) as reply:  # noqa: S310 (loopback)
        assert reply.status == 200
    added = operators_add()
    assert added.returncode == 0, added.stderr
    assert "first@example.com is an operator" in added.stdout


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_web_and_worker_run_as_the_units_run_them(
    tmp_path: Path, direct_database_url: str, smtp: SmtpDouble
) -> None:
    """The first app, a signup through the proxy's address, its email sent by the worker,
    and that account confirmed and made the first operator."""
    port = free_port()
    env = {
        # systemd starts a unit with a clean environment: the file, the unit's lines.
        "PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8",
        **environment_file(DEPLOY / "authsvc.env.example"), **real_secrets(),
        "AUTHSVC_DATABASE_URL": direct_database_url,
        # Plain SMTP to the test's server: production asks nothing of the scheme.
        "AUTHSVC_MAIL_URL": smtp.url,
        "AUTHSVC_DATA_DIR": str(tmp_path / "state"),
    }
    first_app = subprocess.run(
        [AUTHSVC, "apps", "create", "shop", "--redirect-url", "https://shop.example.com/"],
        env=env, capture_output=True, text=True, timeout=60, check=False)
    assert first_app.returncode == 0, first_app.stderr
    api_key = re.search(r"^api key: (\S+)$", first_app.stdout, re.MULTILINE)
    assert api_key, first_app.stdout

    web_env = {**env, **unit_environment("authsvc-web.service"),
               "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "run" / "metrics")}
    web_argv = [f"127.0.0.1:{port}" if word == "127.0.0.1:8000" else word
                for word in exec_start("authsvc-web.service")]
    worker_argv = [str(free_port()) if word == "9200" else word
                   for word in exec_start("authsvc-worker.service")]
    logs = {name: (tmp_path / f"{name}.log").open("wb") for name in ("web", "worker")}
    web = subprocess.Popen(web_argv, env=web_env, stderr=logs["web"])
    worker = subprocess.Popen(worker_argv, env=env, stderr=logs["worker"])
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: http_status(base + "/readyz") == 200, timeout=60, what="the web app")
        request = urllib.request.Request(  # noqa: S310 (loopback)
            base + "/api/v1/signups", method="POST",
            data=json.dumps({"email": "first@example.com",
                             "password": "a first user's passphrase"}).encode(),
            headers={"Authorization": f"Bearer {api_key.group(1)}",
                     "Content-Type": "application/json", "X-Forwarded-For": "198.51.100.7"})
        with urllib.request.urlopen(request, timeout=30) as reply:  # noqa: S310 (loopback)
            assert reply.status == 202
        wait_until(lambda: len(smtp.messages) == 1, timeout=60, what="the verification email")
        assert smtp.messages[0].rcpt_tos == ["first@example.com"]
        assert "https://auth.example.com/verify?token=" in smtp.messages[0].text
        _first_operator(env, base, api_key.group(1), smtp.messages[0].text)
    finally:
        for process in (web, worker):
            process.send_signal(signal.SIGTERM)
        codes = [process.wait(timeout=60) for process in (web, worker)]
        for log in logs.values():
            log.close()
    assert codes == [0, 0], [(tmp_path / f"{n}.log").read_text()[-2000:] for n in logs]
    for name in logs:  # every line JSON, as the journal will keep them
        for line in (tmp_path / f"{name}.log").read_text().splitlines():
            json.loads(line)


def _shell_lines(section: str) -> list[str]:
    """The commands of docs/DEPLOY.md's section starting `## {section}`, in order."""
    text = (ROOT / "docs" / "DEPLOY.md").read_text()
    body = text.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", body, re.DOTALL)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def test_the_certificate_exists_before_the_tls_site_is_enabled() -> None:
    """nginx refuses a site whose ssl_certificate file is missing, so certbot must get the
    certificate before the site is enabled, and by a way that needs no authsvc site."""
    lines = _shell_lines("7. TLS in front")
    certbot = next(i for i, line in enumerate(lines) if line.startswith("certbot certonly"))
    enable = next(i for i, line in enumerate(lines) if "sites-enabled/authsvc" in line)
    assert certbot < enable, lines
    assert "--webroot" in lines[certbot], "certbot --nginx runs nginx -t on the site"
    webroot = re.search(r"-w (\S+)", lines[certbot])
    assert webroot, lines[certbot]
    # Renewals go the same way: the port-80 server answers the challenge from that root.
    site = (DEPLOY / "nginx.conf").read_text()
    plain = site.split("listen 443", 1)[0]
    assert "location /.well-known/acme-challenge/" in plain
    assert f"root {webroot.group(1)};" in plain
