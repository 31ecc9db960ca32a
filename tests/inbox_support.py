"""Helpers for the test-inbox tests: an in-process sink and HTTP server, sending mail."""

from __future__ import annotations

import asyncio
import json
import smtplib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import EmailMessage
from http.client import HTTPConnection
from typing import Any
from urllib.parse import urlsplit

from psycopg_pool import ConnectionPool
from werkzeug.serving import make_server

from authsvc.accounts.passwords import Passwords
from authsvc.clock import Clock, system_clock
from authsvc.config import load_settings
from authsvc.inbox.server import InboxServer
from authsvc.inbox.smtp import InboxSink
from authsvc.services import Services, build_services
from authsvc.web.app import create_app
from testkit.servers import serve_in_thread
from testkit.waiting import free_port


@contextmanager
def running_sink(pool: ConnectionPool, **options: Any) -> Iterator[InboxSink]:
    """A sink on a free port; `options` are InboxSink's own (size limits, prune interval)."""
    sink = InboxSink(pool, "inbox.test", port=free_port(), **options)
    sink.start()
    try:
        yield sink
    finally:
        sink.stop()


def email(
    to: str | list[str],
    subject: str = "Confirm your email",
    text: str = "Open https://app.example/verify?token=abc to confirm.",
    html: str | None = None,
    message_id: str | None = None,
    sender: str = "authsvc <no-reply@localhost>",
) -> EmailMessage:
    message = EmailMessage()
    message["From"] = sender
    message["To"] = ", ".join([to] if isinstance(to, str) else to)
    message["Subject"] = subject
    if message_id:
        message["Message-ID"] = message_id
    message.set_content(text)
    if html is not None:
        message.add_alternative(html, subtype="html")
    return message


def send(port: int, message: EmailMessage, recipients: list[str] | None = None) -> None:
    with smtplib.SMTP("127.0.0.1", port, timeout=10) as client:
        client.send_message(message, to_addrs=recipients)


@contextmanager
def serving_inbox(
    sink: InboxSink, svc: Services, *, listen_url: str | None, upstream: str | None = None,
    port: int | None = None,
) -> Iterator[str]:
    """The inbox's HTTP server on the sink's loop, as `authsvc inbox --http-port` runs it."""
    server = InboxServer(
        svc, listen_url=listen_url, port=port or free_port(), upstream=upstream
    )
    asyncio.run_coroutine_threadsafe(server.start(), sink.loop).result(timeout=20)
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), sink.loop).result(timeout=20)


def inbox_services(
    env: dict[str, str], pool: ConnectionPool, passwords: Passwords, *,
    clock: Clock = system_clock,
) -> Services:
    """What the inbox server is given: settings with the inbox on, the pool, the clock."""
    loaded = load_settings({**env, "AUTHSVC_TEST_INBOX": "on"})
    return build_services(loaded, pool, clock=clock, passwords=passwords)


@dataclass
class Answer:
    status_code: int
    headers: Any
    data: bytes
    mimetype: str = field(init=False)

    def __post_init__(self) -> None:
        self.mimetype = (self.headers.get("Content-Type") or "").split(";")[0]

    @property
    def json(self) -> Any:
        return json.loads(self.data)

    def get_data(self, as_text: bool = False) -> Any:
        return self.data.decode() if as_text else self.data


class HttpClient:
    """Just enough of Flask's test client, over real HTTP (redirects are not followed)."""

    def __init__(self, url: str, token: str | None = None) -> None:
        self.url = url.rstrip("/")
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.token = token

    def open(
        self, path: str, method: str = "GET", headers: dict[str, str] | None = None,
        timeout: float = 40, body: bytes | None = None,
    ) -> Answer:
        sent = dict(headers or {})
        if self.token:
            sent.setdefault("Authorization", f"Bearer {self.token}")
        conn = HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            return Answer(response.status, response.headers, response.read())
        finally:
            conn.close()

    def get(self, path: str, headers: dict[str, str] | None = None) -> Answer:
        return self.open(path, headers=headers)

    def post(self, path: str, headers: dict[str, str] | None = None) -> Answer:
        return self.open(path, "POST", headers)

    def delete(self, path: str, headers: dict[str, str] | None = None) -> Answer:
        return self.open(path, "DELETE", headers)


def serve_front(
    sink: InboxSink, env: dict[str, str], pool: ConnectionPool, passwords: Passwords,
    clock: Clock = system_clock, **settings: str,
) -> Iterator[str]:
    """As `authsvc dev`: the Flask app under a real WSGI server, the inbox server before it."""
    svc = inbox_services({**env, **settings}, pool, passwords, clock=clock)
    app = create_app(svc.settings, pool=pool, passwords=passwords, clock=clock)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = serve_in_thread(server)
    try:
        with serving_inbox(
            sink, svc, listen_url=env["AUTHSVC_DIRECT_DATABASE_URL"],
            upstream=f"http://127.0.0.1:{server.server_port}",
        ) as url:
            yield url
    finally:
        server.shutdown()
        thread.join(timeout=10)
