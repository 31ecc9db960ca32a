"""Start-up for every command: validated settings, a database URL, driver errors as one line.

`database_errors` is the CLI's one boundary for the driver (procrastinate's
pattern): the `authsvc` group runs every command inside it, so no command
catches psycopg errors itself and every one says the same thing about them.
A database too old for this release's migrations is said there too, once for
`db upgrade` and `dev`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
import psycopg

from authsvc.config import ConfigError, Settings, load_settings
from authsvc.db.connections import connect, resolve_database_url
from authsvc.db.embedded import has_embedded_database
from authsvc.db.migrate import OlderThanBaseline


def settings_or_exit() -> Settings:
    """Load settings, or print every problem and exit 2 (no traceback)."""
    try:
        return load_settings()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def database_url_or_exit(settings: Settings, *, create: bool = False) -> str:
    """The configured URL, or the embedded server's (started now), or a clean exit.

    Without a URL, only `create` (`authsvc dev`, `db upgrade`) may make a new
    embedded database: any other command pointed at a data dir that has none
    (a typo, another working directory) says so instead of starting an empty
    server there and failing on a missing schema.
    """
    if not settings.database_url and not create and not has_embedded_database(settings.data_dir):
        raise click.ClickException(
            f"no database in {settings.data_dir}: `authsvc dev` or `authsvc db upgrade` creates "
            "one there; or set AUTHSVC_DATA_DIR to the folder that has one, or "
            "AUTHSVC_DATABASE_URL")
    try:
        return resolve_database_url(settings)
    except Exception as exc:  # pgserver failing to start is an operator problem
        raise click.ClickException(f"cannot start the embedded PostgreSQL: {exc}") from None


def check_database(url: str) -> None:
    """Connect once, so an unreachable database fails here rather than in a child process."""
    with connect(url, connect_timeout=10):
        pass


# The schema is older than the code: a table, column or function a query needs is missing.
_SCHEMA_BEHIND = (
    psycopg.errors.UndefinedTable,
    psycopg.errors.UndefinedColumn,
    psycopg.errors.UndefinedFunction,
)


@contextmanager
def database_errors() -> Iterator[None]:
    """Turn the driver's errors into one-line click errors (exit 1, no traceback)."""
    try:
        yield
    except OlderThanBaseline as exc:
        raise click.ClickException(str(exc)) from None
    except _SCHEMA_BEHIND:
        raise click.ClickException(
            "the schema is missing or out of date: run `authsvc db upgrade` first"
        ) from None
    except psycopg.OperationalError as exc:
        raise click.ClickException(f"cannot reach the database: {_reason(exc)}") from None
    except psycopg.Error as exc:
        raise click.ClickException(f"the database refused the operation: {_reason(exc)}") from None


def _reason(exc: psycopg.Error) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class FiniteFloatRange(click.FloatRange):
    """FloatRange that also refuses NaN, which click lets through (it would spin or overflow)."""

    name = "finite float range"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail("must be a finite number", param, ctx)
        return float(number)
