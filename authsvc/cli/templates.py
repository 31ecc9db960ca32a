"""`authsvc templates preview`: one email of an app's template, marked preview, to an address.

It goes through the outbox like any email (so into the test inbox in
development), with sample values: its link and code redeem nothing.
"""

from __future__ import annotations

from uuid import UUID

import click

from authsvc.accounts import links
from authsvc.apps import keys
from authsvc.cli.options import parsed_address
from authsvc.cli.startup import database_url_or_exit, settings_or_exit
from authsvc.db.connections import connect
from authsvc.emails.app_templates import KINDS, template_locale
from authsvc.emails.preview import PREVIEW
from authsvc.outbox import NO_OUTCOME_EVENTS, enqueue_email


@click.group()
def templates() -> None:
    """Apps' own email templates."""


@templates.command("preview")
@click.option("--app", "app_id", required=True, help="The app's id (see `authsvc apps list`).")
@click.option("--kind", required=True, type=click.Choice(KINDS), help="Which email.")
@click.option("--locale", required=True, help="A BCP 47 tag, e.g. de or pt-BR.")
@click.option("--to", "address", required=True, help="Where the preview goes.")
def preview(app_id: str, kind: str, locale: str, address: str) -> None:
    """Send one email of the app's template for KIND and LOCALE (the built-in one where the
    app has none), in the app's brand, marked preview, with sample values."""
    try:
        app = UUID(app_id)
    except ValueError:
        raise click.BadParameter(f"not an app id (a UUID): {app_id!r}",
                                 param_hint="--app") from None
    try:
        tag = template_locale(locale)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--locale") from None
    recipient = parsed_address(address, "--to")
    settings = settings_or_exit()
    with connect(database_url_or_exit(settings)) as conn, conn.transaction():
        listing = keys.find_app_listing(conn, app)
        if listing is None or listing.revoked_at is not None:
            raise click.ClickException(f"no live app with id {app}")
        # Branded as the app's own account's email would be, its locale carried as a
        # request's is (so a tag authsvc ships no catalog for finds the app's template
        # for it); no account, no link that redeems, no event to the app.
        payload = links.email_payload(None, own_account=True, locale=tag)
        job_id = enqueue_email(
            conn, template=kind, recipient=recipient, app_id=app,
            payload={**payload, PREVIEW: True, NO_OUTCOME_EVENTS: True,
                     "app_name": listing.name})
    click.echo(f"queued preview job {job_id}: {kind} in {tag} for {listing.name} to {recipient}")
