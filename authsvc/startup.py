"""Start-up for every command: validated settings and a database URL, or a clean exit."""

from __future__ import annotations

import click

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
