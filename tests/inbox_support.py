"""Helpers for the test-inbox tests: an in-process sink, sending mail."""

from __future__ import annotations

import smtplib
from collections.abc import Iterator
from contextlib import contextmanager
from email.message import EmailMessage
from typing import Any

from psycopg_pool import ConnectionPool

from authsvc.inbox.smtp import InboxSink
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
