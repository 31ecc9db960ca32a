"""The `authsvc` command: the composition root that wires every part together."""

from __future__ import annotations

import signal
import sys
from types import FrameType

import click
from dotenv import load_dotenv

from authsvc.cli import apps, db, dev, inbox, outbox, serve, suppressions
from authsvc.cli import worker as worker_command
from authsvc.cli.startup import database_errors


class AuthsvcGroup(click.Group):
    """The command group; every subcommand runs inside the one driver-error boundary."""

    def invoke(self, ctx: click.Context) -> object:
        with database_errors():
            return super().invoke(ctx)


@click.group(cls=AuthsvcGroup, context_settings={"help_option_names": ["-h", "--help"]})
# The installed distribution's version (pyproject.toml), as `authsvc 0.1.0`.
@click.version_option(package_name="authsvc", prog_name="authsvc", message="%(prog)s %(version)s")
def main() -> None:
    """authsvc: signup verification and password-reset emails."""
    load_dotenv(".env", override=False)
    # Until a command installs its own handler, SIGTERM exits through Python
    # so atexit runs and an embedded PostgreSQL this process started stops.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)


def _exit_on_sigterm(signum: int, _frame: FrameType | None) -> None:
    sys.exit(128 + signum)


main.add_command(db.db)
main.add_command(apps.apps)
main.add_command(serve.serve)
main.add_command(dev.dev)
main.add_command(inbox.inbox)
main.add_command(worker_command.worker)
main.add_command(outbox.outbox)
main.add_command(suppressions.suppressions)
