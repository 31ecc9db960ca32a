"""`authsvc apps create|list|update|rotate-key|revoke`: embedding apps and their keys."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from uuid import UUID

import click
import psycopg

from authsvc.app_events.targets import WebhookTargetRefused, validate_webhook_url
from authsvc.apps import brands, keys
from authsvc.apps.keys import register_app, validate_redirect_url
from authsvc.cli.options import parsed_by
from authsvc.cli.startup import database_url_or_exit, settings_or_exit
from authsvc.config import Settings
from authsvc.db.connections import connect


@click.group()
def apps() -> None:
    """Embedding apps and their API keys."""


def _check_app_id(_ctx: click.Context, _param: click.Parameter, value: str) -> UUID:
    try:
        return UUID(value)
    except ValueError:
        raise click.BadParameter(f"not an app id (a UUID, see `apps list`): {value!r}") from None


def _check_name(name: str) -> str:
    if not 1 <= len(name.strip()) <= 100:
        raise click.BadParameter("must be 1-100 characters", param_hint="NAME")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        raise click.BadParameter("may not contain control characters", param_hint="NAME")
    return name.strip()


@dataclass(frozen=True)
class Changed:
    """A brand option given on the command line: its checked value, None to clear it."""

    value: str | None


def _brand_field(_ctx: click.Context, param: click.Parameter, value: str | None) -> Changed | None:
    """A brand option through the API's own rule (apps/brands.py check_brand_field)."""
    if value is None:
        return None
    if value == "":
        return Changed(None)
    try:
        return Changed(brands.check_brand_field(str(param.name), value))
    except brands.InvalidBrand as exc:
        raise click.BadParameter(str(exc)) from None


def _check_webhook(settings: Settings, url: str, option: str = "--webhook-url") -> str:
    try:
        return validate_webhook_url(url, production=settings.production)
    except WebhookTargetRefused as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None


@contextmanager
def _transaction(settings: Settings) -> Iterator[psycopg.Connection]:
    """One transaction for the command (the `authsvc` group's boundary words its errors)."""
    url = database_url_or_exit(settings)
    with connect(url) as conn, conn.transaction():
        yield conn


def _require_live(conn: psycopg.Connection, app_id: UUID) -> None:
    """Exit with the reason when `app_id` is unknown or revoked."""
    listing = keys.find_app_listing(conn, app_id)
    if listing is None:
        raise click.ClickException(f"no app with id {app_id}")
    if listing.revoked_at is not None:
        raise click.ClickException(f"app {app_id} was revoked on {listing.revoked_at:%Y-%m-%d}")


def _print_secret(secret: str) -> None:
    click.echo(f"webhook secret: {secret}")
    click.echo("Store the secret now: receivers verify with it; it is not shown again.", err=True)


@apps.command("create")
@click.argument("name")
@click.option(
    "--redirect-url",
    "redirect_urls",
    multiple=True,
    required=True,
    callback=parsed_by(validate_redirect_url),
    help="Allowed link target (repeatable); links may point here or below it.",
)
@click.option("--webhook-url", help="Where events are POSTed (https in production).")
@click.option(
    "--sign-up-by-email", is_flag=True,
    help="A sign-in link requested for an address with no account creates the account"
    " (confirmed, no password) when it is used.",
)
def apps_create(
    name: str, redirect_urls: list[str], webhook_url: str | None, sign_up_by_email: bool
) -> None:
    """Register an app; prints its id, API key and webhook secret once (the key stored hashed)."""
    name = _check_name(name)
    settings = settings_or_exit()
    if webhook_url is not None:
        webhook_url = _check_webhook(settings, webhook_url)
    secret = None
    with _transaction(settings) as conn:
        if keys.name_taken(conn, name):
            raise click.ClickException(f"an app named {name!r} already exists (see `apps list`)")
        app, key = register_app(conn, name, redirect_urls)
        if sign_up_by_email:
            keys.set_sign_up_by_email(conn, app.id, True)
        if webhook_url is not None:
            secret = keys.set_webhook(conn, app.id, webhook_url, settings.secret_keys)
    click.echo(f"app id:  {app.id}")
    click.echo(f"api key: {key}")
    click.echo("Store the key now: it is not shown again.", err=True)
    if secret is not None:
        _print_secret(secret)


@apps.command("list")
def apps_list() -> None:
    """Every app: id, name, state, redirect URLs, webhook URL (never keys or secrets)."""
    with _transaction(settings_or_exit()) as conn:
        listings = keys.list_apps(conn)
    if not listings:
        click.echo("no apps registered (add one with `authsvc apps create`)")
        return
    for app in listings:
        state = "live" if app.revoked_at is None else f"revoked {app.revoked_at:%Y-%m-%d}"
        click.echo(
            f"{app.id}  {app.name}  {state}  redirect: {', '.join(app.redirect_urls) or '-'}"
            f"  webhook: {app.webhook_url or '-'}  delivery: {app.delivery_url or '-'}"
            f"  sign-up by email: {'on' if app.sign_up_by_email else 'off'}"
            f"  brand: {app.shown_product_name or '-'}  mail from: {app.mail_from or '-'}"
        )


@apps.command("update")
@click.argument("app_id", metavar="ID", callback=_check_app_id)
@click.option(
    "--redirect-url",
    "redirect_urls",
    multiple=True,
    callback=parsed_by(validate_redirect_url),
    help="Replace the allowed link targets (repeatable).",
)
@click.option("--webhook-url", help="Send events here (https in production).")
@click.option("--no-webhook", is_flag=True, help="Stop sending events (pending ones fail).")
@click.option(
    "--new-webhook-secret", is_flag=True, help="Replace the signing secret; prints the new one."
)
@click.option(
    "--delivery-url",
    help="The app delivers its own mail: each email for its own accounts is POSTed here"
    " (a Standard Webhook signed with the webhook secret; https in production).",
)
@click.option("--no-delivery-url", is_flag=True, help="Send its mail through authsvc again.")
@click.option(
    "--sign-up-by-email/--no-sign-up-by-email", default=None,
    help="Whether a sign-in link requested for an address with no account creates the account.",
)
@click.option("--product-name", callback=_brand_field,
              help="The brand's name in its accounts' emails and pages (plain text, ≤ 64).")
@click.option("--logo-url", callback=_brand_field, help="The brand's logo (https only).")
@click.option("--brand-color", callback=_brand_field, help="The brand's colour, #rrggbb.")
@click.option("--support-url", callback=_brand_field, help="Where its accounts get help.")
@click.option("--default-locale", callback=_brand_field,
              help="Emails its calls queue when neither request nor account names a locale.")
@click.option("--mail-from", callback=_brand_field,
              help="The From of its accounts' emails, 'Name <address>' (operators only).")
def apps_update(
    app_id: UUID,
    redirect_urls: list[str],
    webhook_url: str | None,
    no_webhook: bool,
    new_webhook_secret: bool,
    delivery_url: str | None,
    no_delivery_url: bool,
    sign_up_by_email: bool | None,
    **brand: Changed,
) -> None:
    """Change an app's redirect URLs, webhook, mail delivery URL, sign-up by email or brand.

    A brand option given as '' clears that field (the service's own again).
    """
    if webhook_url is not None and no_webhook:
        raise click.UsageError("--webhook-url and --no-webhook contradict each other")
    if delivery_url is not None and no_delivery_url:
        raise click.UsageError("--delivery-url and --no-delivery-url contradict each other")
    if not (redirect_urls or webhook_url is not None or no_webhook or new_webhook_secret
            or delivery_url is not None or no_delivery_url or sign_up_by_email is not None
            or any(value is not None for value in brand.values())):
        raise click.UsageError(
            "nothing to change: give --redirect-url, --webhook-url, --no-webhook,"
            " --new-webhook-secret, --delivery-url, --no-delivery-url,"
            " --[no-]sign-up-by-email or a brand option (--product-name, --logo-url,"
            " --brand-color, --support-url, --default-locale, --mail-from)"
        )
    settings = settings_or_exit()
    if webhook_url is not None:
        webhook_url = _check_webhook(settings, webhook_url)
    if delivery_url is not None:
        delivery_url = _check_webhook(settings, delivery_url, "--delivery-url")
    secret = None
    with _transaction(settings) as conn:
        _require_live(conn, app_id)
        if redirect_urls:
            keys.update_redirect_urls(conn, app_id, redirect_urls)
        if webhook_url is not None:
            secret = keys.set_webhook(conn, app_id, webhook_url, settings.secret_keys)
        if no_webhook:
            keys.clear_webhook(conn, app_id)
        if delivery_url is not None:
            secret = keys.set_delivery_url(
                conn, app_id, delivery_url, settings.secret_keys) or secret
        if no_delivery_url:
            keys.clear_delivery_url(conn, app_id)
        if sign_up_by_email is not None:
            keys.set_sign_up_by_email(conn, app_id, sign_up_by_email)
        changes = {name: value.value for name, value in brand.items() if value is not None}
        if changes:
            brands.update_brand(conn, app_id, changes)
        if new_webhook_secret:
            try:
                secret = keys.replace_webhook_secret(conn, app_id, settings.secret_keys)
            except LookupError:
                raise click.ClickException(
                    f"app {app_id} has no webhook or delivery URL: set one with --webhook-url"
                    " or --delivery-url"
                ) from None
    click.echo(f"updated app {app_id}")
    if secret is not None:
        _print_secret(secret)


@apps.command("rotate-key")
@click.argument("app_id", metavar="ID", callback=_check_app_id)
def apps_rotate_key(app_id: UUID) -> None:
    """Give an app a new API key; the old one stops working at once."""
    with _transaction(settings_or_exit()) as conn:
        _require_live(conn, app_id)
        key = keys.rotate_key(conn, app_id)
        if key is None:  # revoked between the check and the update
            raise click.ClickException(f"app {app_id} was revoked meanwhile")
    click.echo(f"api key: {key}")
    click.echo("Store the key now: it is not shown again; the old key no longer works.", err=True)


@apps.command("revoke")
@click.argument("app_id", metavar="ID", callback=_check_app_id)
def apps_revoke(app_id: UUID) -> None:
    """End an app: its key stops working at once and its events stop."""
    with _transaction(settings_or_exit()) as conn:
        _require_live(conn, app_id)
        keys.revoke_app(conn, app_id)
    click.echo(f"revoked app {app_id}")
