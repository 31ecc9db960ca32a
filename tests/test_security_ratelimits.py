"""Rate limits hold in total across 2 app instances x 2 gunicorn workers on one database.

Limits live in PostgreSQL, not in a process, so spreading a burst over every
worker of every instance must not buy an attacker more attempts. Day-long
windows keep a window boundary out of the test.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest

from authsvc.apps.keys import register_app
from testkit.waiting import free_ports, wait_until_ready

ROOT = Path(__file__).resolve().parent.parent
APP_LIMIT, EMAIL_LIMIT, IP_LIMIT = 12, 3, 7
_CSRF = re.compile(r'name="csrf_token" type="hidden" value="([^"]+)"')


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *_args, **_kwargs):
        return None


def _request(url: str, data: bytes | None = None, headers: dict[str, str] | None = None,
             method: str = "GET") -> urllib.request.Request:
    return urllib.request.Request(url, data, headers or {}, method=method)  # noqa: S310  (127.0.0.1)


def _open(
    opener: urllib.request.OpenerDirector, request: urllib.request.Request
) -> tuple[int, str]:
    try:
        with opener.open(request, timeout=20) as reply:
            return int(reply.status), reply.read().decode()
    except urllib.error.HTTPError as error:
        return int(error.code), error.read().decode()


@pytest.fixture
def instances(env: dict[str, str], tmp_path: Path) -> Iterator[list[str]]:
    """Two `authsvc serve` instances with two gunicorn workers each, one database."""
    process_env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AUTHSVC_")},
        **env,
        "AUTHSVC_RATE_LIMIT_APP": f"{APP_LIMIT}/1d",
        "AUTHSVC_RATE_LIMIT_EMAIL": f"{EMAIL_LIMIT}/1d",
        "AUTHSVC_RATE_LIMIT_IP": f"{IP_LIMIT}/1d",
    }
    ports = free_ports(2)
    servers = [
        subprocess.Popen(
            [sys.executable, "-m", "authsvc.cli", "serve", "--bind", f"127.0.0.1:{port}",
             "--workers", "2", "--threads", "4"],
            env=process_env, cwd=ROOT, stdout=subprocess.DEVNULL,
            stderr=(tmp_path / f"serve-{port}.log").open("wb"), start_new_session=True,
        )
        for port in ports
    ]
    bases = [f"http://127.0.0.1:{port}" for port in ports]
    try:
        for base, server in zip(bases, servers, strict=True):
            wait_until_ready(base + "/readyz", server)
        yield bases
    finally:
        for server in servers:
            os.killpg(server.pid, signal.SIGTERM)
        for server in servers:
            server.wait(timeout=30)


def _burst(calls: list) -> Counter[int]:
    with ThreadPoolExecutor(max_workers=8) as pool:
        return Counter(pool.map(lambda call: call(), calls))


def _api_call(base: str, key: str, path: str, body: dict):
    def call() -> int:
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        request = _request(base + path, json.dumps(body).encode(), headers, "POST")
        return _open(urllib.request.build_opener(), request)[0]
    return call


@pytest.mark.e2e
def test_per_app_limit_holds_across_instances(conn: psycopg.Connection, instances) -> None:
    _app, key = register_app(conn, "burst", ["https://allowed.example.com/"])
    calls = [_api_call(instances[i % 2], key, "/api/v1/verifications",
                       {"email": f"someone-{i}@example.com"}) for i in range(2 * APP_LIMIT)]
    assert _burst(calls) == {202: APP_LIMIT, 429: APP_LIMIT}


@pytest.mark.e2e
def test_per_email_limit_holds_across_instances(conn: psycopg.Connection, instances) -> None:
    conn.execute("INSERT INTO users (email, password_hash) VALUES ('target@example.com', 'x')")
    _app, key = register_app(conn, "resets", ["https://allowed.example.com/"])
    calls = [_api_call(instances[i % 2], key, "/api/v1/password-resets",
                       {"email": "target@example.com"}) for i in range(3 * EMAIL_LIMIT)]
    # Over the limit the answer stays the same (it must not reveal the account)...
    assert _burst(calls) == {202: 3 * EMAIL_LIMIT}
    # ...but nothing more is sent.
    queued = conn.execute(
        "SELECT count(*) FROM email_jobs WHERE recipient = 'target@example.com'"
    ).fetchone()
    assert queued == (EMAIL_LIMIT,)


@pytest.mark.e2e
def test_per_ip_form_limit_holds_across_instances(instances) -> None:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), _NoRedirects)
    status, page = _open(opener, _request(instances[0] + "/reset"))
    assert status == 200
    match = _CSRF.search(page)
    assert match, page
    token = match.group(1)

    def post(i: int):
        def call() -> int:
            form = f"csrf_token={token}&email=visitor-{i}%40example.com".encode()
            request = _request(instances[i % 2] + "/reset", form, method="POST")
            return _open(opener, request)[0]
        return call

    answers = _burst([post(i) for i in range(IP_LIMIT + 5)])
    assert answers == {303: IP_LIMIT, 429: 5}
