"""`authsvc db upgrade`."""

from __future__ import annotations

import click
import psycopg

from authsvc.cli.startup import database_url_or_exit, settings_or_exit
from authsvc.db.migrate import upgrade


@click.group()
def db() -> None:
    """Database schema commands."""


@db.command("upgrade")
def db_upgrade() -> None:
    """Apply pending migrations (idempotent; safe to run concurrently)."""
    url = database_url_or_exit(settings_or_exit(), create=True)
    try:
        applied = upgrade(url)
    except psycopg.OperationalError:
        raise  # "cannot reach the database", said once for every command
    except psycopg.Error as exc:
        raise click.ClickException(f"migration failed: {exc}") from None
    if applied:
        for migration in applied:
            click.echo(f"applied {migration.version}_{migration.name}")
    else:
        click.echo("schema is up to date")
