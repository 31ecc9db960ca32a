"""`authsvc operators add|remove|list|totp ADDRESS` and `operators log [--json]` (SPEC §15).

Adding and removing are logged like console actions, by "command line".
"""

from __future__ import annotations

import json

import click
import psycopg

from authsvc.accounts import users
from authsvc.cli.options import parsed_address
from authsvc.cli.startup import database_url_or_exit, settings_or_exit
from authsvc.clock import system_clock
from authsvc.db.connections import connect
from authsvc.operators import log, roles, totp


@click.group("operators")
def operators_group() -> None:
    """Who may sign in to the operator console at /admin, and what they did there."""


def _connect() -> psycopg.Connection:
    return connect(database_url_or_exit(settings_or_exit()), connect_timeout=10)


@operators_group.command("add")
@click.argument("address")
def operators_add(address: str) -> None:
    """Make the confirmed account using ADDRESS an operator."""
    email = parsed_address(address)
    now = system_clock()
    with _connect() as conn, conn.transaction():
        user = users.find_user_by_email(conn, email)
        if user is None:
            raise click.ClickException(f"no account uses {email}")
        if not user.verified:
            raise click.ClickException(
                f"{email} is not confirmed yet: only a confirmed account can be an operator")
        if not roles.add_operator(conn, user.id, now):
            raise click.ClickException(f"{email} is already an operator")
        log.write_entry(conn, log.CLI_ACTOR, "operator.add", f"account {user.id}", now)
    click.echo(f"{email} is an operator: they sign in at /admin/login")


@operators_group.command("remove")
@click.argument("address")
def operators_remove(address: str) -> None:
    """Take the operator role from ADDRESS; their console sessions end at once."""
    email = parsed_address(address)
    now = system_clock()
    with _connect() as conn, conn.transaction():
        user = users.find_user_by_email(conn, email)
        if user is None or not roles.remove_operator(conn, user.id):
            raise click.ClickException(f"{email} is not an operator")
        log.write_entry(conn, log.CLI_ACTOR, "operator.remove", f"account {user.id}", now)
    click.echo(f"{email} is no longer an operator; their console sessions ended")


@operators_group.command("totp")
@click.argument("address")
@click.option("--remove", is_flag=True, help="Go back to codes by email.")
def operators_totp(address: str, remove: bool) -> None:
    """Set up TOTP for ADDRESS: prints the secret once, for an authenticator app."""
    email = parsed_address(address)
    settings = settings_or_exit()
    now = system_clock()
    secret = totp.new_secret()
    with _connect() as conn, conn.transaction():
        user = users.find_user_by_email(conn, email)
        sealed = None if remove or user is None else totp.seal(settings.secret_keys, user.id,
                                                               secret)
        if user is None or not roles.set_totp(conn, user.id, sealed):
            raise click.ClickException(f"{email} is not an operator")
        action = "operator.totp_remove" if remove else "operator.totp_set"
        log.write_entry(conn, log.CLI_ACTOR, action, f"account {user.id}", now)
    if remove:
        click.echo(f"{email} signs in with codes by email again")
        return
    # Printed once, here on the host, and never shown by the console.
    click.echo(f"secret: {totp.base32(secret)}")
    click.echo(f"uri:    {totp.provisioning_uri(secret, email)}")
    click.echo(f"{email} now signs in with the authenticator's code; emailed codes stop")


@operators_group.command("list")
def operators_list() -> None:
    """Every operator, oldest first."""
    with _connect() as conn:
        found = roles.list_operators(conn)
    if not found:
        click.echo("no operators: add one with `authsvc operators add ADDRESS`")
        return
    for operator in found:
        seen = operator.last_seen_at.strftime("%Y-%m-%d %H:%M UTC") if operator.last_seen_at \
            else "never signed in"
        how = "totp" if operator.totp else "email code"
        click.echo(f"{operator.email}  added {operator.added_at:%Y-%m-%d %H:%M UTC}  "
                   f"{how}  last seen {seen}")


@operators_group.command("log")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="Only the newest N entries (default: every entry).")
def operators_log(as_json: bool, limit: int | None) -> None:
    """What operators did, newest first."""
    with _connect() as conn:
        for entry in log.walk_entries(conn, limit):
            _print_entry(entry, as_json)


def _print_entry(entry: log.LogEntry, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(entry.as_json(), ensure_ascii=False))
        return
    detail = f"  ({entry.detail})" if entry.detail else ""
    click.echo(f"{entry.created_at:%Y-%m-%d %H:%M:%S}  {entry.operator_email}  "
               f"{entry.action}  {entry.target}{detail}")
