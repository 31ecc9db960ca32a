"""Start-up for every command: validated settings and a database URL, or a clean exit."""

from __future__ import annotations

import math
from typing import Any

import click
import psycopg

from authsvc.config import ConfigError, Settings, load_settings
from authsvc.db import connect, resolve_database_url


def settings_or_exit() -> Settings:
    """Load settings, or print every problem and exit 2 (no traceback)."""
    try:
        return load_settings()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def database_url_or_exit(settings: Settings) -> str:
    try:
        return resolve_database_url(settings)
    except Exception as exc:  # pgserver failing to start is an operator problem
        raise click.ClickException(f"cannot start the embedded PostgreSQL: {exc}") from None


def check_database_or_exit(url: str) -> None:
    """Fail at once, with the reason, when the database cannot be reached."""
    try:
        with connect(url, connect_timeout=10):
            pass
    except psycopg.OperationalError as exc:
        raise click.ClickException(f"cannot reach the database: {str(exc).strip()}") from None


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
