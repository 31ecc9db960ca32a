"""`authsvc suppressions list|remove ADDRESS`: the operator's view of the suppression list.

`remove` is the only way an address gets mail again after a provider reported
a hard bounce or a complaint (authsvc/bounces/suppressions.py says why).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click
import psycopg

from authsvc.bounces import suppressions as store
from authsvc.cli.options import parsed_address
from authsvc.cli.startup import database_url_or_exit, settings_or_exit
from authsvc.db.connections import connect


@click.group()
def suppressions() -> None:
    """Addresses that get no mail (hard bounces and complaints reported by the provider)."""


@contextmanager
def _connection() -> Iterator[psycopg.Connection]:
    url = database_url_or_exit(settings_or_exit())
    try:
        with connect(url, connect_timeout=10) as conn:
            yield conn
    except psycopg.errors.UndefinedTable:
        raise click.ClickException("the schema is missing: run `authsvc db upgrade`") from None
    except psycopg.OperationalError as exc:
        raise click.ClickException(f"cannot reach the database: {exc}") from None
    except psycopg.Error as exc:
        raise click.ClickException(f"the database refused the operation: {exc}") from None


@suppressions.command("list")
def suppressions_list() -> None:
    """Every suppressed address, newest first, with the event that put it there."""
    with _connection() as conn:
        rows = store.list_suppressions(conn)
    if not rows:
        click.echo("no suppressed addresses")
        return
    head = f"{'suppressed at':<19}  {'event':<17}  {'provider':<8}  {'provider id':<36}"
    click.echo(head + "  address")
    for row in rows:
        when = row.suppressed_at.strftime("%Y-%m-%d %H:%M:%S")
        click.echo(f"{when:<19}  {row.event:<17}  {row.provider:<8}  "
                   f"{row.provider_message_id or '-':<36}  {row.address}")


@suppressions.command("remove")
@click.argument("address")
def suppressions_remove(address: str) -> None:
    """Let ADDRESS receive mail again (after the owner fixed the mailbox, say)."""
    canonical = parsed_address(address)
    with _connection() as conn:
        removed = store.remove_suppression(conn, canonical)
    if not removed:
        raise click.ClickException(f"{canonical} is not suppressed")
    click.echo(f"removed {canonical}: later emails to it will be sent")
