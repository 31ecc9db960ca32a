"""The HTTP servers the project starts, attacked from outside with raw bytes.

`authsvc serve` (gunicorn) and the inbox's server before it (`authsvc inbox
--http-port --upstream`, the one server of /_inbox), as `authsvc dev` runs
them, each a real process on a free port: unread bodies
must not poison a kept-alive connection for the next (maybe someone else's)
request, every /api/v1 error is problem+json whoever answers it, no byte of a
header or a filter makes anything 5xx, and nothing private leaks into an
answer or a log line.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.client import HTTPConnection, HTTPResponse
from pathlib import Path
from typing import Any

import pytest

from authsvc.apps.keys import register_app
from authsvc.db.connections import connect
from testkit.waiting import free_ports, http_status, wait_until

pytestmark = pytest.mark.e2e
AUTHSVC = str(Path(sys.executable).parent / "authsvc")
INBOX_TOKEN = "inbox-token-for-transport-tests"
SECRET = "SECRETQUERYTOKEN0123456789"


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0]

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Stack:
    web_port: int
    front_port: int
    key: str
    web_log: Path
    front_log: Path


def _read_answer(sock: socket.socket, method: str = "GET") -> Answer:
    response = HTTPResponse(sock, method=method)
    response.begin()
    body = response.read()
    headers = {k.lower(): v for k, v in response.getheaders()}
    return Answer(response.status, headers, body)


def raw(port: int, data: bytes, method: str = "GET") -> Answer:
    """Send `data` as it is (a whole request, which should say Connection: close)."""
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        sock.sendall(data)
        return _read_answer(sock, method)


def request(
    port: int, method: str, path: str, body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> Answer:
    conn = HTTPConnection("127.0.0.1", port, timeout=15)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return Answer(
            response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        )
    finally:
        conn.close()


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def stack(env: dict[str, str], tmp_path: Path) -> Iterator[Stack]:
    """`authsvc serve` on a private port and `authsvc inbox`'s front before it, as `authsvc dev`."""
    with connect(env["AUTHSVC_DATABASE_URL"]) as conn, conn.transaction():
        _app, key = register_app(conn, "transport", ["http://127.0.0.1:8000"])
    web_port, front_port, smtp_port = free_ports(3)
    child_env = {
        **os.environ, **env, "HOME": str(tmp_path),
        "AUTHSVC_TEST_INBOX": "on", "AUTHSVC_TEST_INBOX_TOKEN": INBOX_TOKEN,
    }
    web_log, front_log = tmp_path / "web.log", tmp_path / "front.log"
    with web_log.open("wb") as web_out, front_log.open("wb") as front_out:
        web = subprocess.Popen(
            [AUTHSVC, "serve", "--bind", f"127.0.0.1:{web_port}", "--workers", "1",
             "--threads", "4"],
            env=child_env, stdout=web_out, stderr=subprocess.STDOUT,
        )
        front = subprocess.Popen(
            [AUTHSVC, "inbox", "--port", str(smtp_port), "--http-port", str(front_port),
             "--upstream", f"http://127.0.0.1:{web_port}"],
            env=child_env, stdout=front_out, stderr=subprocess.STDOUT,
        )
    try:
        def ready() -> bool:
            for process, log in ((web, web_log), (front, front_log)):
                assert process.poll() is None, log.read_text()[-3000:]
            return http_status(f"http://127.0.0.1:{front_port}/healthz") == 200

        wait_until(ready, timeout=60, what="gunicorn and the front", every=0.1)
        yield Stack(web_port, front_port, key, web_log, front_log)
    finally:
        _stop(front)
        _stop(web)


def _is_problem(answer: Answer, status: int, code: str | None = None) -> None:
    assert answer.status == status, (answer.status, answer.body[:300])
    assert answer.content_type == "application/problem+json", answer.headers
    if code is not None:
        assert answer.json()["code"] == code, answer.body[:300]


def test_an_unread_body_never_costs_the_next_request_a_502(stack: Stack) -> None:
    """A refused body the app did not read: gunicorn says it closes; the front's next call works."""
    big = b'{"email":"' + b"a" * 300_000 + b'"}'
    # Straight to gunicorn on one kept-alive connection: the answer must say it closes.
    conn = HTTPConnection("127.0.0.1", stack.web_port, timeout=15)
    try:
        conn.request("POST", "/api/v1/signups", body=big,
                     headers={"Content-Type": "application/json"})
        answer = conn.getresponse()
        answer.read()
        assert answer.status == 401
        assert (answer.getheader("Connection") or "").lower() == "close", answer.getheaders()
    finally:
        conn.close()

    # Through the front: refused large bodies (401 without a key, 413 with one)
    # while other clients send ordinary requests. None of them may meet an
    # upstream connection gunicorn has dropped.
    auth = {"Authorization": f"Bearer {stack.key}", "Content-Type": "application/json"}
    large = b'{"email":"' + b"a" * 1_000_000 + b'"}'

    def refused(i: int) -> int:
        headers = auth if i % 2 else {"Content-Type": "application/json"}
        answer = request(stack.front_port, "POST", "/api/v1/password-resets", large, headers)
        _is_problem(answer, 413 if i % 2 else 401)
        return answer.status

    def ordinary(i: int) -> int:
        if i % 2:
            return request(stack.front_port, "GET", "/healthz").status
        return request(stack.front_port, "POST", "/api/v1/password-resets",
                       b'{"email":"nobody@example.com"}', auth).status

    with ThreadPoolExecutor(max_workers=6) as pool:
        big_ones = [pool.submit(refused, i) for i in range(20)]
        small_ones = [pool.submit(ordinary, i) for i in range(60)]
        statuses = [f.result() for f in big_ones + small_ones]
    assert 502 not in statuses, statuses
    assert all(s < 500 for s in statuses), statuses


def test_an_api_body_over_the_fronts_limit_gets_the_apis_problem(stack: Stack) -> None:
    """The front refuses what it will not buffer in the API's own words, and closes."""
    auth = {"Authorization": f"Bearer {stack.key}", "Content-Type": "application/json"}
    body = b'{"email":"' + b"a" * (2 * 1024 * 1024) + b'"}'
    from_front = request(stack.front_port, "POST", "/api/v1/signups", body, auth)
    _is_problem(from_front, 413, "payload_too_large")
    from_app = request(stack.web_port, "POST", "/api/v1/signups", body, auth)
    _is_problem(from_app, 413, "payload_too_large")
    front_doc, app_doc = from_front.json(), from_app.json()
    assert {k: front_doc[k] for k in ("type", "title", "status", "code")} == {
        k: app_doc[k] for k in ("type", "title", "status", "code")
    }
    assert from_front.headers.get("connection", "").lower() == "close"
    # The front's own inbox paths answer problems too.
    inbox = request(stack.front_port, "POST", "/_inbox/scopes", body,
                    {"Authorization": f"Bearer {INBOX_TOKEN}"})
    _is_problem(inbox, 413, "payload_too_large")


ODD_HEADER_BYTES = [b"\xff\xfe", b"\x80abc", b"Bearer \xc3\x28", b"Bearer \xed\xa0\x80"]


def test_no_header_byte_makes_anything_5xx(stack: Stack) -> None:
    """Non-UTF-8 bytes in Authorization (and any header) get a 4xx from every server."""
    inbox_paths = [
        "/_inbox/scopes/abc/messages",
        "/_inbox/scopes/abc/expect-one?timeout=0&settle=0",
        "/_inbox/scopes",
        "/_inbox/",
    ]
    app_paths = ["/api/v1/signups", "/login"]  # forwarded by the front
    for port, paths in ((stack.front_port, inbox_paths + app_paths), (stack.web_port, app_paths)):
        for path in paths:
            for header in [h + v for v in ODD_HEADER_BYTES for h in (b"Authorization: ", b"X-O: ")]:
                data = (
                    b"GET " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    + header + b"\r\nConnection: close\r\n\r\n"
                )
                answer = raw(port, data)
                assert answer.status < 500, (port, path, header, answer.status, answer.body)
                if path.startswith(("/api/v1", "/_inbox")) and answer.status >= 400:
                    assert answer.content_type == "application/problem+json", (port, path)


FILTER_ATTACKS = ["%00", "a%00b", "%C0%80", "%ED%A0%80", "%FF", "x%00"]


def test_a_nul_or_broken_utf8_in_inbox_filters_is_a_400_never_a_500(stack: Stack) -> None:
    auth = {"Authorization": f"Bearer {INBOX_TOKEN}"}
    port = stack.front_port  # gunicorn serves no /_inbox (test_the_app_has_no_inbox)
    for name in ("q", "to", "subject"):
        for attack in FILTER_ATTACKS:
            for path in (
                f"/_inbox/scopes/abc/messages?{name}={attack}",
                f"/_inbox/scopes/abc/expect-one?timeout=0&settle=0&{name}={attack}",
                f"/_inbox/ui/scopes/abc?{name}={attack}",
            ):
                answer = request(port, "GET", path, headers=auth)
                assert answer.status < 500, (port, path, answer.status, answer.body[:300])
                if "%00" in attack:
                    assert answer.status == 400, (port, path, answer.status)


def test_an_absolute_form_target_never_reveals_the_upstream(stack: Stack) -> None:
    data = (
        b"GET http://evil.example/healthz HTTP/1.1\r\nHost: evil.example\r\n"
        b"Connection: close\r\n\r\n"
    )
    answer = raw(stack.front_port, data)
    assert str(stack.web_port).encode() not in answer.body, answer.body
    assert answer.status != 502, answer.body
    assert answer.status < 500, answer.body
    # The Host header a client chose never becomes a redirect's target.
    redirect = raw(stack.front_port, b"GET /_inbox HTTP/1.1\r\nHost: evil.example\r\n"
                                     b"Connection: close\r\n\r\n")
    assert redirect.status == 308, redirect
    assert redirect.headers["location"] == "/_inbox/", redirect.headers


def test_the_app_has_no_inbox(stack: Stack) -> None:
    """/_inbox has one server, the inbox's: gunicorn's app does not answer it."""
    auth = {"Authorization": f"Bearer {INBOX_TOKEN}"}
    assert request(stack.web_port, "GET", "/_inbox/scopes", headers=auth).status == 404
    assert request(stack.front_port, "GET", "/_inbox/scopes", headers=auth).status == 200


def test_malformed_request_lines_never_log_their_query_string(stack: Stack) -> None:
    bad_lines = [
        f"GET /verify?token={SECRET} HTTP/1.1 junk\r\n".encode(),
        f"GET /verify?token={SECRET}\x01 HTTP/1.1\r\n".encode(),
        f"GET /verify?token={SECRET} HTTP/9.9\r\n".encode(),
    ]
    for port in (stack.web_port, stack.front_port):
        for line in bad_lines:
            answer = raw(port, line + b"Host: x\r\nConnection: close\r\n\r\n")
            assert 400 <= answer.status < 500, (port, line, answer.status)
    # A request that is logged on both sides marks the end of what the bad ones wrote.
    wait_until(lambda: "Invalid request" in stack.web_log.read_text(), timeout=10,
               what="gunicorn's line for the malformed request")
    wait_until(lambda: any(line.get("logger") == "aiohttp.server"
                           for line in _json_lines(stack.front_log)), timeout=10,
               what="the front's line for the malformed request")
    for log in (stack.web_log, stack.front_log):
        text = log.read_text()
        assert SECRET not in text, f"{log.name}: {text[-2000:]}"
    assert "front_bad_request" in stack.front_log.read_text()


def _json_lines(log: Path) -> list[dict]:
    """The log's JSON lines (a line being written may be cut short: it is left out)."""
    lines = []
    for text in log.read_text().splitlines():
        try:
            lines.append(json.loads(text))
        except ValueError:
            continue
    return lines


_LINK_QUERY = b"?token=SECRET-link-token"
_AIOHTTP_REFUSALS = (400, 414, 431)  # it says 400 to each today; 414 and 431 would do
# What each server's own parser refuses, before any code of ours runs, and the
# statuses it may answer with.
_UNPARSABLE: dict[str, list[tuple[bytes, tuple[int, ...]]]] = {
    "gunicorn": [
        (b"G@T /api/v1/signups" + _LINK_QUERY + b" HTTP/1.1\r\n\r\n", (400,)),
        (b"GET /api/v1/signups" + _LINK_QUERY + b" HTTP/7.5\r\n\r\n", (400,)),
        (b"GET /api/v1/" + b"a" * 5000 + _LINK_QUERY + b" HTTP/1.1\r\n\r\n", (414,)),
        (b"GET /api/v1/openapi.json HTTP/1.1\r\nX-Big: " + b"b" * 9000 + b"\r\n\r\n", (431,)),
        (b"POST /api/v1/signups HTTP/1.1\r\nContent-Length: abc\r\n\r\n", (400,)),
    ],
    "inbox server": [
        (b"G@T /api/v1/signups" + _LINK_QUERY + b" HTTP/1.1\r\n\r\n", _AIOHTTP_REFUSALS),
        (b"GET /api/v1/\xff" + _LINK_QUERY + b" HTTP/1.1\r\n\r\n", _AIOHTTP_REFUSALS),
        (b"GET /api/v1/" + b"a" * 9000 + _LINK_QUERY + b" HTTP/1.1\r\n\r\n", _AIOHTTP_REFUSALS),
        (b"GET /api/v1/openapi.json" + _LINK_QUERY + b" HTTP/1.1\r\nX-Big: " + b"b" * 9000
         + b"\r\n\r\n", _AIOHTTP_REFUSALS),
        (b"POST /api/v1/signups" + _LINK_QUERY + b" HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
         _AIOHTTP_REFUSALS),
    ],
}


@pytest.mark.parametrize("server", list(_UNPARSABLE))
def test_requests_a_server_cannot_parse_get_a_problem_not_a_page(stack: Stack, server: str) -> None:
    """The servers answered these themselves with a page quoting the request line,
    query string and all: gunicorn in HTML, aiohttp in text/plain."""
    port = stack.web_port if server == "gunicorn" else stack.front_port
    for data, statuses in _UNPARSABLE[server]:
        answer = raw(port, data)
        assert answer.status in statuses, (answer.status, data[:40])
        _is_problem(answer, answer.status)
        assert b"SECRET" not in answer.body and b"<html" not in answer.body, answer.body[:300]
        if server == "gunicorn":  # aiohttp closes the connection too, without saying so
            assert answer.headers.get("connection") == "close", answer.headers
