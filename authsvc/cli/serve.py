"""`authsvc serve`: the web app under gunicorn."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import click

from authsvc.cli.startup import check_database, database_url_or_exit, settings_or_exit
from authsvc.config import Settings


def gunicorn_argv(bind: str, workers: int, threads: int) -> list[str]:
    """Command line for the web app; gthread keeps long polls from starving the server."""
    return [
        sys.executable,
        "-m",
        "gunicorn",
        "--bind",
        bind,
        "--workers",
        str(workers),
        "--worker-class",
        "gthread",
        "--threads",
        str(threads),
        "--graceful-timeout",
        "10",
        # Every line (gunicorn's own, one `http_request` per response, the
        # app's) is the same JSON shape on stderr: authsvc/observability/gunicorn_logging.py.
        "--logger-class",
        "authsvc.observability.gunicorn_logging.JsonGunicornLogger",
        "--access-logfile",
        "-",
        # gunicorn 27 opens a control socket in ~/.gunicorn shared by every
        # instance on the host; authsvc does not use it.
        "--no-control-socket",
        # Hooks: a large unread body closes its connection; requests gunicorn
        # cannot parse get problem+json (see the module).
        "--config",
        "python:authsvc.web.gunicorn_config",
        "authsvc.web.app:create_served_app()",
    ]


@click.command()
@click.option("--bind", default="127.0.0.1:8000", show_default=True)
@click.option("--workers", type=click.IntRange(1, 64), default=2, show_default=True)
@click.option("--threads", type=click.IntRange(1, 256), default=16, show_default=True)
def serve(bind: str, workers: int, threads: int) -> None:
    """Run the web app under gunicorn."""
    settings = settings_or_exit()
    # Resolve (and start, if embedded) the database once here, so every
    # gunicorn worker connects to the same URL instead of each starting it.
    url = database_url_or_exit(settings)
    # Checked here: otherwise every gunicorn worker fails to boot in turn,
    # each with a traceback, before gunicorn gives up.
    check_database(url)
    env = dict(os.environ, AUTHSVC_DATABASE_URL=url)
    if not settings.database_url:  # the embedded server: no pooler, LISTEN may use it
        env["AUTHSVC_DIRECT_DATABASE_URL"] = url
    env["PROMETHEUS_MULTIPROC_DIR"] = str(multiprocess_metrics_dir(settings))
    # A child rather than exec: this process keeps the embedded server's
    # handle, so the server stops when serving stops.
    child = subprocess.Popen(gunicorn_argv(bind, workers, threads), env=env)
    forward = lambda signum, _frame: child.send_signal(signum)  # noqa: E731
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    sys.exit(child.wait())


def multiprocess_metrics_dir(settings: Settings) -> Path:
    """Where every gunicorn worker writes its metrics, so any worker's /metrics reads them
    all: set before gunicorn forks (`serve`, `dev`); a previous run's files are removed."""
    folder = settings.metrics_multiproc_dir or settings.data_dir / "prometheus-multiproc"
    return prepare_multiprocess_dir(folder)


def prepare_multiprocess_dir(folder: Path) -> Path:
    """Create `folder` and remove a previous run's files (they belong to dead processes)."""
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.db"):
        stale.unlink()
    return folder
