"""`authsvc users show|delete ADDRESS`: one account's state, and an operator's deletion (SPEC §12).

`show` prints what an operator needs to answer "what is going on with this
account": whether the address is proven, whether a password is set, a
pending address change, the confirmed changes and whether their undo links
still work, and the live sessions. It never prints a usable link or code.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import click

from authsvc.accounts import change_records, deletion, sessions, users
from authsvc.accounts.change_records import EmailChange
from authsvc.cli.options import parsed_address
from authsvc.cli.startup import database_url_or_exit, settings_or_exit
from authsvc.clock import system_clock
from authsvc.db.connections import connect


@click.group()
def users_group() -> None:
    """Accounts: look one up, or delete it."""


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _undo_state(change: EmailChange, revert_ttl: int, now: datetime) -> str:
    if change.ended_by == "undone":
        return f"undone {_when(change.ended_at)}" if change.ended_at else "undone"
    if change.ended_by == "voided":
        return "undo link voided by an undo to an older address"
    until = change.changed_at + timedelta(seconds=revert_ttl)
    return f"undo link live until {_when(until)}" if until > now else "undo link expired"


@users_group.command("show")
@click.argument("address")
def users_show(address: str) -> None:
    """The account using ADDRESS: state, pending change, address changes, sessions."""
    email = parsed_address(address)
    settings = settings_or_exit()
    now = system_clock()
    with connect(database_url_or_exit(settings), connect_timeout=10) as conn:
        user = users.find_user_by_email(conn, email)
        if user is None:
            raise click.ClickException(f"no account uses {email}")
        changes = change_records.list_changes(conn, user.id)
        live = sessions.list_sessions(conn, user.id, now)
    if user.email_verified_at is not None:
        state = f"confirmed (since {_when(user.email_verified_at)})"
    else:
        state = "unconfirmed, contested" if user.contested else "unconfirmed"
    click.echo(f"account:        {user.id}")
    click.echo(f"address:        {user.email}")
    click.echo(f"state:          {state}")
    click.echo(f"password:       {'set' if user.password_hash else 'none (a reset link sets one)'}")
    click.echo(f"pending change: {user.pending_email or 'none'}")
    click.echo(f"address changes: {len(changes) or 'none'}")
    for change in changes:
        click.echo(f"  {_when(change.changed_at)}  {change.old_email} -> {change.new_email}  "
                   f"({_undo_state(change, settings.email_revert_ttl, now)})")
    click.echo(f"sessions:       {len(live) or 'none'}")
    for session in live:
        click.echo(f"  started {_when(session.created_at)}, last seen "
                   f"{_when(session.last_seen_at)}, {session.user_agent or 'no user agent'}")


@users_group.command("delete")
@click.argument("address")
def users_delete(address: str) -> None:
    """Delete the account using ADDRESS, as its owner's confirmed deletion would."""
    email = parsed_address(address)
    settings = settings_or_exit()
    with connect(database_url_or_exit(settings), connect_timeout=10) as conn:
        deleted = deletion.delete_account_by_address(
            conn, settings.secret_keys, email=email, now=system_clock())
    if deleted is None:
        raise click.ClickException(f"no account uses {email}")
    click.echo(f"deleted account {deleted.id} ({email}): its sessions, codes and pending emails"
               " are gone, its apps hear user.deleted, and the address can sign up again")
