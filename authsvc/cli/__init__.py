"""The `authsvc` command: the composition root that wires every part together."""

from __future__ import annotations

import importlib
import signal
import sys
from types import FrameType

import click
from dotenv import load_dotenv

from authsvc.cli.startup import database_errors

# Each command's module is imported only when that command runs, so
# `authsvc worker` never loads Flask or the web layer that `serve` and `dev`
# need (tests/test_architecture.py checks both the graph and a real process).
COMMANDS = {
    "db": "authsvc.cli.db:db",
    "apps": "authsvc.cli.apps:apps",
    "serve": "authsvc.cli.serve:serve",
    "dev": "authsvc.cli.dev:dev",
    "inbox": "authsvc.cli.inbox:inbox",
    "worker": "authsvc.cli.worker:worker",
    "outbox": "authsvc.cli.outbox:outbox",
    "suppressions": "authsvc.cli.suppressions:suppressions",
    "users": "authsvc.cli.users:users_group",
    "operators": "authsvc.cli.operators:operators_group",
    "check": "authsvc.cli.check:check",
    "templates": "authsvc.cli.templates:templates",
}


class AuthsvcGroup(click.Group):
    """The command group: subcommands load lazily and run inside the one driver-error boundary."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module_name, _, attribute = COMMANDS[cmd_name].partition(":")
        command = getattr(importlib.import_module(module_name), attribute)
        assert isinstance(command, click.Command), module_name
        return command

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

