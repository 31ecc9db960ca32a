"""Start-up for every command: validated settings and a database URL, or a clean exit."""

from __future__ import annotations

import math

import click
import psycopg

from authsvc.config import ConfigError, Settings, load_settings
from authsvc.db import resolve_database_url


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
        with psycopg.connect(url, connect_timeout=10):
            pass
    except psycopg.OperationalError as exc:
        raise click.ClickException(f"cannot reach the database: {str(exc).strip()}") from None


def finite(_ctx: click.Context, _param: click.Parameter, value: float | None) -> float | None:
    """Click callback: FloatRange lets NaN through, which would spin or overflow later."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter("must be a finite number")
    return value
