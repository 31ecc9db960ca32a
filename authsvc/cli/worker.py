"""`authsvc worker`: one worker process, or a supervisor of N of them."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from types import FrameType

import click
import psycopg

from authsvc.cli.startup import FiniteFloatRange, database_url_or_exit, settings_or_exit
from authsvc.config import Settings
from authsvc.db.connections import connect, resolve_listen_url
from authsvc.db.migrate import pending_migrations
from authsvc.emails.looks import database_looks
from authsvc.locales import CatalogMissing, load_catalogs
from authsvc.observability.logs import configure_logging, log_event
from authsvc.services import token_codec
from authsvc.worker.delivery import RetryPolicy
from authsvc.worker.event_delivery import WebhookDelivery
from authsvc.worker.loop import MailerUnavailable, Worker, WorkerOptions
from authsvc.worker.mailers import Mailer
from authsvc.worker.metrics_port import WorkerMetrics
from authsvc.worker.providers import mailer_factory
from authsvc.worker.render import Renderer

log = logging.getLogger(__name__)


def smtp_mailer_factory(settings: Settings) -> Callable[[float], Mailer]:
    """One mailer per sender thread, by AUTHSVC_MAIL_URL (authsvc/worker/providers)."""
    return mailer_factory(settings)


def _require_current_schema(url: str, wait_seconds: float) -> None:
    # A worker (re)started during a database restart or failover waits for it,
    # as the running loop does, instead of exiting into a restart loop.
    deadline = time.monotonic() + wait_seconds
    delay = 0.5
    while True:
        try:
            with connect(url, connect_timeout=10) as conn:
                pending = pending_migrations(conn)
            break
        except psycopg.OperationalError as exc:
            if time.monotonic() + delay > deadline:
                raise  # said as "cannot reach the database" by the CLI's boundary
            log_event(
                log,
                "database_unavailable",
                logging.WARNING,
                error=str(exc).strip(),
                retry_in_seconds=delay,
            )
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
    if pending:
        names = ", ".join(f"{m.version}_{m.name}" for m in pending)
        raise click.ClickException(f"the schema is not current ({names}): run `authsvc db upgrade`")


def _number_option(
    flag: str, kind: click.ParamType, default: float | None, help_text: str
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A numeric option of `authsvc worker`; its default is shown unless it is None
    (then the help text says where the value comes from)."""
    return click.option(
        flag, type=kind, default=default, show_default=default is not None, help=help_text
    )


@click.command()
@_number_option("--concurrency", click.IntRange(1, 256), 4, "Sends in flight at once (threads).")
@_number_option("--batch", click.IntRange(1, 1000), 10, "Jobs claimed per statement.")
@_number_option(
    "--lease-seconds",
    FiniteFloatRange(1, 86400),
    None,
    "Lease per claim [default: AUTHSVC_LEASE_SECONDS].",
)
@_number_option(
    "--poll-seconds",
    FiniteFloatRange(0.05, 3600),
    5.0,
    "Look for due jobs at least this often, notification or not.",
)
@click.option("--once", is_flag=True, help="Drain what is due now, then exit.")
@_number_option(
    "--wait-for-database",
    FiniteFloatRange(0, 3600),
    60.0,
    "At start-up, wait this long for the database.",
)
@_number_option(
    "--retry-base-seconds",
    FiniteFloatRange(0.01, 86400),
    30.0,
    "Delay before the first retry of a transient failure.",
)
@_number_option(
    "--processes",
    click.IntRange(1, 64),
    1,
    "Worker processes on this host (one core each); the parent only supervises.",
)
@_number_option(
    "--retry-cap-seconds",
    FiniteFloatRange(0.01, 86400),
    3600.0,
    "Longest retry delay (before jitter of up to 50%).",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(1, 65535),
    default=None,
    help="Serve this worker's own metrics on 127.0.0.1:PORT/metrics"
    " (--processes N: PORT..PORT+N-1), behind AUTHSVC_METRICS_TOKEN when set.",
)
def worker(
    concurrency: int,
    batch: int,
    lease_seconds: float | None,
    poll_seconds: float,
    once: bool,
    retry_base_seconds: float,
    retry_cap_seconds: float,
    wait_for_database: float,
    processes: int,
    metrics_port: int | None,
) -> None:
    """Send queued emails: claim due outbox jobs under a lease and deliver them."""
    # Before any child starts: a refused configuration is said once, not once per child.
    settings = settings_or_exit()
    try:
        load_catalogs()  # not at the first email in a language: before any is claimed
    except CatalogMissing as exc:
        raise click.ClickException(str(exc)) from None
    if processes > 1:
        params = click.get_current_context().params
        raise SystemExit(_supervise(processes, _child_argv(params), metrics_port))
    url = database_url_or_exit(settings)
    configure_logging(settings.log_level)
    _require_current_schema(url, wait_for_database)
    codec = token_codec(settings)
    options = WorkerOptions(
        concurrency=concurrency,
        batch=batch,
        lease_seconds=lease_seconds or settings.lease_seconds,
        poll_seconds=poll_seconds,
        once=once,
        retry=RetryPolicy(
            max_attempts=settings.max_attempts,
            base_seconds=retry_base_seconds,
            cap_seconds=max(retry_cap_seconds, retry_base_seconds),
        ),
    )
    webhooks = WebhookDelivery(
        settings.secret_keys, options.retry, options.send_timeout, settings.production
    )
    metrics = WorkerMetrics()
    if metrics_port is not None:
        try:
            metrics.serve(metrics_port, token=settings.metrics_token)
        except OSError as exc:
            message = f"cannot serve metrics on port {metrics_port}: {exc}"
            raise click.ClickException(message) from None
    runner = Worker(
        url, Renderer(settings, codec, looks=database_looks(url, settings.product_name)),
        smtp_mailer_factory(settings), options,
        webhooks=webhooks, listen_url=resolve_listen_url(settings), metrics=metrics,
    )

    def stop(_signum: int, _frame: FrameType | None) -> None:
        runner.request_stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        runner.run()
    except MailerUnavailable as exc:
        raise click.ClickException(str(exc)) from None


def _child_argv(params: dict[str, object]) -> list[str]:
    """`authsvc worker` with this command's options, as one child process runs it."""
    argv = [sys.executable, "-m", "authsvc.cli", "worker"]
    for name, value in params.items():
        if name in ("processes", "metrics_port") or value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        argv += [flag] if value is True else [flag, str(value)]
    return argv


def _supervise(count: int, argv: list[str], metrics_port: int | None = None) -> int:
    """Run `count` workers; pass SIGTERM/SIGINT on; if one fails, stop the rest and fail too.

    The GIL keeps one process to one core; claims never overlap, so N
    processes are N independent workers. A child that exits on its own is
    not restarted here: the process manager restarts the group.
    """
    configure_logging()
    def child_argv(index: int) -> list[str]:
        if metrics_port is None:
            return argv
        return [*argv, "--metrics-port", str(metrics_port + index)]

    children = [subprocess.Popen(child_argv(i)) for i in range(count)]
    stopping = False

    def forward(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    log_event(log, "workers_started", processes=count, pids=[c.pid for c in children])
    status = 0
    while any(child.poll() is None for child in children):
        for child in children:
            code = child.poll()
            if code not in (None, 0) and status == 0:
                status = code if code > 0 else 1
                if not stopping:
                    log_event(log, "worker_exited", logging.ERROR, pid=child.pid, code=code)
                    forward(signal.SIGTERM, None)
        time.sleep(0.2)  # supervision only; the children do the work
    for child in children:
        code = child.returncode
        if code not in (0, None) and status == 0:
            status = code if code > 0 else 1
    return status
