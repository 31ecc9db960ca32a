"""`authsvc inbox`: the test-inbox SMTP sink, and optionally its HTTP server (API, pages)."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading

import click

from authsvc.cli.startup import database_url_or_exit, settings_or_exit
from authsvc.db.connections import connect, create_pool, is_direct, resolve_listen_url
from authsvc.inbox.messages import DEFAULT_MAX_PER_SCOPE
from authsvc.inbox.server import DEFAULT_POOL_SIZE, InboxServer
from authsvc.inbox.smtp import DEFAULT_MAX_MESSAGE_BYTES, InboxSink
from authsvc.observability.logs import configure_logging, log_event
from authsvc.services import build_services

logger = logging.getLogger(__name__)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=2525, show_default=True)
@click.option(
    "--max-message-size",
    type=click.IntRange(1024, 100 * 1024 * 1024),
    default=DEFAULT_MAX_MESSAGE_BYTES,
    show_default=True,
    help="Bytes; larger messages are refused with 552.",
)
@click.option(
    "--max-per-scope",
    type=click.IntRange(1, 100_000),
    default=DEFAULT_MAX_PER_SCOPE,
    show_default=True,
    help="Messages kept per scope; the oldest are dropped first.",
)
@click.option("--http-host", default="127.0.0.1", show_default=True)
@click.option(
    "--http-port", type=click.IntRange(1, 65535), default=None,
    help="Also serve the inbox's HTTP API and pages (/_inbox) here.",
)
@click.option(
    "--upstream", default=None, metavar="URL",
    help="Forward every path outside /_inbox to this web app, e.g. http://127.0.0.1:8001 "
    "(as `authsvc dev` does).",
)
def inbox(
    host: str, port: int, max_message_size: int, max_per_scope: int, http_host: str,
    http_port: int | None, upstream: str | None,
) -> None:
    """Run the test-inbox SMTP sink (needs AUTHSVC_TEST_INBOX=on; never in production)."""
    if upstream is not None and http_port is None:
        raise click.UsageError("--upstream needs --http-port")
    settings = settings_or_exit()
    if not settings.test_inbox:
        raise click.ClickException(
            "the test inbox is off: set AUTHSVC_TEST_INBOX=on to run its SMTP sink "
            "(it is refused in production)"
        )
    configure_logging()
    # aiosmtpd logs every SMTP command at INFO; our own stored/refused events suffice.
    logging.getLogger("mail.log").setLevel(logging.WARNING)
    url = database_url_or_exit(settings)
    # One direct connection first: an unreachable database or a missing
    # schema fails at once (the pool would retry for its whole timeout).
    # Driver errors become one line at the `authsvc` group (cli/startup.py).
    with connect(url, connect_timeout=10) as conn:
        conn.execute("SELECT 1 FROM inbox_messages LIMIT 0")
    pool = create_pool(url, min_size=1, max_size=4, name="authsvc-inbox")
    http_pool = None
    try:
        sink = InboxSink(
            pool, settings.test_inbox_domain, host=host, port=port,
            max_message_bytes=max_message_size, max_per_scope=max_per_scope,
            max_total_bytes=settings.test_inbox_max_bytes,
        )
        try:
            sink.start()
        except OSError as exc:
            raise click.ClickException(f"cannot listen on {host}:{port}: {exc}") from None
        log_event(logger, "inbox_smtp_listening", host=host, port=port,
                  domain=settings.test_inbox_domain)
        server = None
        if http_port is not None:
            listen_url = resolve_listen_url(settings)
            # Unchecked at checkout: waking a thousand polls costs no extra round
            # trip each; a dead connection fails one request (503) and is dropped.
            http_pool = create_pool(
                url, min_size=1, max_size=DEFAULT_POOL_SIZE, name="authsvc-inbox-http",
                check=False, direct=is_direct(url, listen_url),
            )
            server = InboxServer(
                build_services(settings, http_pool), listen_url=listen_url,
                host=http_host, port=http_port, upstream=upstream,
            )
            try:
                asyncio.run_coroutine_threadsafe(server.start(), sink.loop).result(timeout=20)
            except OSError as exc:
                sink.stop()
                raise click.ClickException(
                    f"cannot listen on {http_host}:{http_port}: {exc}"
                ) from None
            log_event(logger, "inbox_http_listening", host=http_host, port=http_port,
                      upstream=upstream)
        _wait_for_stop_signal()
        if server is not None:
            asyncio.run_coroutine_threadsafe(server.stop(), sink.loop).result(timeout=20)
        sink.stop()
    finally:
        if http_pool is not None:
            http_pool.close()
        pool.close()


def _wait_for_stop_signal() -> None:
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda _signum, _frame: stop.set())
    while not stop.wait(1.0):
        pass
