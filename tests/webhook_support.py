"""A real webhook receiver for tests, and a worker that delivers webhooks to it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg

from authsvc.apps.keys import App, register_app, set_webhook
from authsvc.clock import Clock
from authsvc.config import Settings
from authsvc.worker.delivery import RetryPolicy
from authsvc.worker.event_delivery import WebhookDelivery
from authsvc.worker.loop import Worker, WorkerOptions
from authsvc.worker.mailers import NullMailer
from testkit.servers import serve_in_thread
from tests.worker_support import renderer


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


class Receiver:
    """An HTTP server on loopback that records every POST and answers `statuses` in turn.

    Once the scripted statuses run out it answers 200. `serving` runs one.
    """

    def __init__(self, statuses: list[int] | None = None) -> None:
        self.requests: list[Received] = []
        self._statuses = list(statuses or [])
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver._lock:
                    receiver.requests.append(
                        Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                    )
                    status = receiver._statuses.pop(0) if receiver._statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/authsvc"

    def of_type(self, event_type: str) -> list[Received]:
        import json

        with self._lock:
            return [r for r in self.requests if json.loads(r.body)["type"] == event_type]


def register_webhook_app(
    conn: psycopg.Connection, settings: Settings, url: str, name: str = "shop"
) -> tuple[App, str, str]:
    """An app allowed to redirect to https://allowed.example.com/, sending events to `url`."""
    with conn.transaction():
        app, key = register_app(conn, name, ["https://allowed.example.com/welcome"])
        secret = set_webhook(conn, app.id, url, settings.secret_keys)
    assert secret is not None
    return app, key, secret


FAST_RETRY = RetryPolicy(max_attempts=50, base_seconds=0.05, cap_seconds=0.2)


def webhook_worker(
    url: str, settings: Settings, clock: Clock, *, retry: RetryPolicy = FAST_RETRY,
    production: bool = False,
) -> Worker:
    """A worker that discards email (null mailer) and delivers webhooks for real."""
    options = WorkerOptions(concurrency=2, batch=10, lease_seconds=10, poll_seconds=0.1,
                            retry=retry)
    webhooks = WebhookDelivery(settings.secret_keys, retry, options.send_timeout, production)
    return Worker(url, renderer(settings, clock), lambda _t: NullMailer(), options,
                  webhooks=webhooks)


@contextmanager
def serving(statuses: list[int] | None = None) -> Iterator[Receiver]:
    """A Receiver answering for the length of the block."""
    receiver = Receiver(statuses)
    serve_in_thread(receiver.server)
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
