"""`authsvc apps create`."""

from __future__ import annotations

import click
import psycopg

from authsvc.app_keys import register_app, validate_redirect_url
from authsvc.cli.startup import database_url_or_exit, settings_or_exit
from authsvc.db import connect


@click.group()
def apps() -> None:
    """Embedding apps and their API keys."""


def _check_url(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> list[str]:
    try:
        return [validate_redirect_url(v) for v in values]
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@apps.command("create")
@click.argument("name")
@click.option(
    "--redirect-url",
    "redirect_urls",
    multiple=True,
    required=True,
    callback=_check_url,
    help="Allowed link target (repeatable); links may point here or below it.",
)
def apps_create(name: str, redirect_urls: list[str]) -> None:
    """Register an app; prints its id and API key once (only a hash is stored)."""
    if not 1 <= len(name.strip()) <= 100:
        raise click.BadParameter("must be 1-100 characters", param_hint="NAME")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        raise click.BadParameter("may not contain control characters", param_hint="NAME")
    url = database_url_or_exit(settings_or_exit())
    try:
        with connect(url) as conn, conn.transaction():
            app, key = register_app(conn, name.strip(), redirect_urls)
    except psycopg.errors.UndefinedTable:
        raise click.ClickException(
            "the schema is missing: run `authsvc db upgrade` first"
        ) from None
    except psycopg.OperationalError as exc:
        raise click.ClickException(f"cannot reach the database: {str(exc).strip()}") from None
    click.echo(f"app id:  {app.id}")
    click.echo(f"api key: {key}")
    click.echo("Store the key now: it is not shown again.", err=True)
