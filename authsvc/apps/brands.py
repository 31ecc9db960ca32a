"""An app's brand (SPEC §14): the name, logo, colour and support link its accounts see.

The brand applies only to the app's own accounts (authsvc.apps.account_apps);
whoever renders an email or a page decides that, then asks here for the
brand, which is the service's own where the app set nothing.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit
from uuid import UUID

from psycopg import Connection

from authsvc.accounts.addresses import InvalidAddress, parse_mailbox
from authsvc.accounts.hidden_characters import hides_text
from authsvc.db.queries import load_queries
from authsvc.locales import parse_locale_tag, supported_locale

Q = load_queries(Path(__file__).with_suffix(".sql"))


@dataclass(frozen=True)
class Brand:
    product_name: str
    logo_url: str | None = None
    brand_color: str | None = None
    support_url: str | None = None
    default_locale: str | None = None
    mail_from: str | None = None  # None: the service's AUTHSVC_MAIL_FROM
    app_id: UUID | None = None  # None: the service's own brand


def shown_product_name(name: str) -> str:
    """A brand's product name as emails, pages and the console show it: one line, no
    hidden or reordering characters, so a name cannot flip the text around it (it may be
    stored with direction controls); its dots and slashes stay. Escaping is the shower's."""
    plain = "".join(" " if hides_text(c) else c for c in unicodedata.normalize("NFKC", name))
    return " ".join(plain.split())


def service_brand(product_name: str) -> Brand:
    """The brand of everything no app brands: `AUTHSVC_PRODUCT_NAME`, nothing else."""
    return Brand(product_name=product_name)


def load_brand(conn: Connection, app_id: UUID, service_product_name: str) -> Brand:
    """`app_id`'s brand, its unset fields the service's; the service's own if the app is gone."""
    fields = brand_fields(conn, app_id)
    if fields is None:
        return service_brand(service_product_name)
    return Brand(fields["product_name"] or service_product_name, fields["logo_url"],
                 fields["brand_color"], fields["support_url"], fields["default_locale"],
                 fields["mail_from"], app_id)


# --- changing a brand (PATCH /api/v1/app, `authsvc apps update`) ---------------------

MAX_PRODUCT_NAME = 64
MAX_BRAND_URL = 2048
BRAND_COLOR = re.compile(r"#[0-9A-Fa-f]{6}")
# The fields an app may set on itself; mail_from is the operators' alone (CLI).
APP_FIELDS = ("product_name", "logo_url", "brand_color", "support_url", "default_locale")


class InvalidBrand(ValueError):
    """A brand field refused: `field` names it, the message says why."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason)
        self.field = field


def _url(field: str, value: str, *, https_only: bool) -> str:
    parts = urlsplit(value)
    schemes = {"https"} if https_only else {"https", "http"}
    if (len(value) > MAX_BRAND_URL or hides_text(value) or "\\" in value
            or any(c.isspace() for c in value)):
        raise InvalidBrand(field, "is not a usable URL")
    needed = "an https URL" if https_only else "an http(s) URL"
    # The scheme as written (urlsplit lowers it): pages, emails and the table's CHECK
    # all read the URL as it is stored.
    written_scheme = value.partition(":")[0]
    if (written_scheme not in schemes or not parts.hostname or parts.username
            or parts.password):
        raise InvalidBrand(field, f"must be {needed} without credentials")
    try:
        parts.port  # noqa: B018 - urlsplit checks the port only when it is read
    except ValueError:
        raise InvalidBrand(field, f"must be {needed} with a valid port") from None
    return value


def check_brand_field(field: str, value: object) -> str | None:
    """`value` as stored for `field` (None clears it); InvalidBrand otherwise.

    One rule for the API and the CLI. The product name is plain text: any
    characters but hidden, reordering or control ones, at most 64; emails
    and pages escape it. The logo is https only (it is fetched by mail
    clients next to the person's own content); the colour is `#rrggbb`.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidBrand(field, "must be a string or null")
    if field == "product_name":
        return _product_name(value)
    if field == "logo_url":
        return _url(field, value, https_only=True)
    if field == "support_url":
        return _url(field, value, https_only=False)
    if field == "brand_color":
        if BRAND_COLOR.fullmatch(value) is None:
            raise InvalidBrand(field, "must be a colour as #rrggbb")
        return value.lower()
    if field == "default_locale":
        try:
            tag = parse_locale_tag(value)
        except ValueError as exc:
            raise InvalidBrand(field, str(exc)) from None
        return supported_locale(tag) or tag
    if field == "mail_from":
        try:
            return parse_mailbox(value)
        except InvalidAddress as exc:
            raise InvalidBrand(field, str(exc)) from None
    raise InvalidBrand(field, "is not a brand field")


# Embeddings, overrides and isolates: a name in a right-to-left script may need them, and
# every place that shows a name drops them (shown_product_name).
_DIRECTION_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")


def _product_name(value: str) -> str:
    """One line of plain text: runs of spaces become one; direction controls are kept,
    any other control, hidden or line-breaking character is refused."""
    if any(unicodedata.category(c) == "Cc" for c in value):
        raise InvalidBrand("product_name", "contains control characters (one line of text)")
    name = " ".join(value.split())
    if not name or len(name) > MAX_PRODUCT_NAME:
        raise InvalidBrand("product_name",
                           f"must be 1-{MAX_PRODUCT_NAME} characters of plain text")
    # Its single spaces are its own.
    if hides_text(_DIRECTION_CONTROLS.sub("", name).replace(" ", "")):
        raise InvalidBrand("product_name", "contains hidden or line-breaking characters")
    return name


def brand_fields(conn: Connection, app_id: UUID) -> dict[str, str | None] | None:
    """The app's brand as set (None fields: unset), mail_from included; None if no live app."""
    row = conn.execute(Q["load_brand"], {"app_id": app_id}).fetchone()
    if row is None:
        return None
    return dict(zip((*APP_FIELDS, "mail_from"), row, strict=True))


def update_brand(conn: Connection, app_id: UUID, changes: Mapping[str, str | None]) -> bool:
    """Set the given (checked) fields, leave the others; False if the app is not live."""
    given = {name: name in changes for name in (*APP_FIELDS, "mail_from")}
    params = {**{f"set_{k}": v for k, v in given.items()},
              **{name: changes.get(name) for name in given}, "app_id": app_id}
    return conn.execute(Q["update_brand"], params).fetchone() is not None
