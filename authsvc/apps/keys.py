"""Embedding apps: API keys (stored hashed), redirect allowlists, webhooks, revocation."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import unquote, urlsplit
from uuid import UUID

from psycopg import Connection
from psycopg.rows import class_row

from authsvc import ratelimit
from authsvc.accounts.hidden_characters import hides_text
from authsvc.app_events.secrets import new_webhook_secret, seal_secret
from authsvc.apps.brands import shown_product_name
from authsvc.config import RateLimit
from authsvc.db.queries import load_queries

Q = load_queries(Path(__file__).with_suffix(".sql"))
KEY_PREFIX = "ask_"
MAX_REDIRECT_URL_LENGTH = 2048


@dataclass(frozen=True)
class App:
    id: UUID
    name: str
    redirect_urls: list[str]
    # `--sign-up-by-email`: a sign-in request for an unknown address creates the
    # account when its link is redeemed (SPEC §13).
    sign_up_by_email: bool = False

    def allows_redirect(self, url: str) -> bool:
        return is_allowed_redirect(url, self.redirect_urls)


def _hash_key(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def validate_redirect_url(url: str) -> str:
    """An absolute http(s) URL without credentials or fragment; ValueError otherwise."""
    # Browsers read a backslash as a slash in http(s) URLs; refuse it outright.
    if (
        len(url) > MAX_REDIRECT_URL_LENGTH
        or "\\" in url
        or hides_text(url)  # in an emailed link: hidden, reordered or split text
    ):
        raise ValueError(f"not a usable URL: {url!r}")
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname or parts.port == 0:
        raise ValueError(f"redirect URLs must be absolute http(s) URLs: {url!r}")
    if parts.username or parts.password or parts.fragment:
        raise ValueError(f"redirect URLs may not carry credentials or a fragment: {url!r}")
    return url


def _path_escapes(path: str) -> bool:
    """Whether some layer of decoding of `path` could resolve outside it.

    A browser resolves dot segments (also percent-encoded ones) before it
    requests the page, so /app/../admin would leave the allowed path; a proxy
    or framework that decodes once more turns %252e%252e into .. as well, so
    every layer is checked, down to where decoding changes nothing. Servlet
    containers drop ";params" first, so "..;" climbs too. An empty segment
    (//) or a backslash is read by some servers as a new root or a separator.
    """
    layer = path
    while True:
        if "\\" in layer or "//" in layer:
            return True
        segments = (segment.split(";")[0] for segment in layer.split("/"))
        if any(segment in {".", ".."} for segment in segments):
            return True
        decoded = unquote(layer)
        if decoded == layer:  # each pass shortens the text, so this ends
            return False
        layer = decoded


def is_allowed_redirect(url: str, allowlist: list[str]) -> bool:
    """Exact scheme, host and port match, and path within an allowed path.

    Matching parsed parts (never string prefixes) is what stops
    `https://app.example.com.evil.net/` and `//evil` from passing.
    """
    try:
        validate_redirect_url(url)
    except ValueError:
        return False
    target = urlsplit(url)
    if _path_escapes(target.path):
        return False
    for allowed in allowlist:
        rule = urlsplit(allowed)
        if (target.scheme, target.hostname, target.port) != (rule.scheme, rule.hostname, rule.port):
            continue
        base = rule.path.rstrip("/")
        if target.path == rule.path or target.path == base or target.path.startswith(base + "/"):
            return True
    return False


def register_app(conn: Connection, name: str, redirect_urls: list[str]) -> tuple[App, str]:
    """Register an app; returns it and its API key (shown once, stored hashed)."""
    for url in redirect_urls:
        validate_redirect_url(url)
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    params = {"name": name, "key_hash": _hash_key(key), "redirect_urls": redirect_urls}
    with conn.cursor(row_factory=class_row(App)) as cur:
        app = cur.execute(Q["insert_app"], params).fetchone()
    assert app is not None
    return app, key


def _well_formed(key: str) -> bool:
    return key.startswith(KEY_PREFIX) and len(key) <= 200


def find_app_by_key(conn: Connection, key: str) -> App | None:
    if not _well_formed(key):
        return None
    with conn.cursor(row_factory=class_row(App)) as cur:
        return cur.execute(Q["find_app_by_key_hash"], {"key_hash": _hash_key(key)}).fetchone()


def find_app_counting_call(
    conn: Connection, key: str, limit: RateLimit, now: datetime
) -> tuple[App, ratelimit.Decision] | None:
    """The key's app and this call's verdict under `limit` (per key), in one round trip.

    None, and nothing counted, for a malformed, unknown or revoked key.
    """
    if not _well_formed(key):
        return None
    ratelimit.check_own_transaction(conn)
    key_hash = _hash_key(key)
    counted = ratelimit.hit_for("app_key", key_hash.hex(), limit, now)
    row = conn.execute(Q["find_app_counting_call"],
                       {"key_hash": key_hash, **counted.params()}).fetchone()
    if row is None:
        return None
    app_id, name, redirect_urls, sign_up_by_email, within = row
    return App(app_id, name, redirect_urls, sign_up_by_email), counted.decision(within)


@dataclass(frozen=True)
class AppListing:
    """An app as operators see it (`authsvc apps list`); never its key or secret."""

    id: UUID
    name: str
    redirect_urls: list[str]
    webhook_url: str | None
    delivery_url: str | None  # where the app takes its own mail (SPEC §10 hook://)
    sign_up_by_email: bool
    created_at: datetime
    revoked_at: datetime | None
    # Its brand (SPEC §14; authsvc.apps.brands): None where the service's own applies.
    product_name: str | None = None
    logo_url: str | None = None
    brand_color: str | None = None
    support_url: str | None = None
    default_locale: str | None = None
    mail_from: str | None = None

    @property
    def shown_product_name(self) -> str | None:
        """The product name as the console and the CLI show it (brands.shown_product_name)."""
        return shown_product_name(self.product_name) if self.product_name else None


def list_apps(conn: Connection) -> list[AppListing]:
    with conn.cursor(row_factory=class_row(AppListing)) as cur:
        return cur.execute(Q["list_apps"]).fetchall()


def find_app_listing(conn: Connection, app_id: UUID) -> AppListing | None:
    with conn.cursor(row_factory=class_row(AppListing)) as cur:
        return cur.execute(Q["find_app_listing"], {"app_id": app_id}).fetchone()


def name_taken(conn: Connection, name: str) -> bool:
    """Whether a live app has this name; locks names until commit, so check-then-insert is safe."""
    conn.execute(Q["lock_app_names"])
    row = conn.execute(Q["name_taken"], {"name": name}).fetchone()
    return bool(row and row[0])


def _updated(conn: Connection, query: str, params: dict[str, object]) -> bool:
    return conn.execute(Q[query], params).fetchone() is not None


def update_redirect_urls(conn: Connection, app_id: UUID, redirect_urls: list[str]) -> bool:
    """Replace a live app's allowlist; False when no live app has this id."""
    for url in redirect_urls:
        validate_redirect_url(url)
    return _updated(
        conn, "update_redirect_urls", {"app_id": app_id, "redirect_urls": redirect_urls}
    )


def set_sign_up_by_email(conn: Connection, app_id: UUID, on: bool) -> bool:
    """Whether a live app's sign-in links create accounts; False when no live app has this id."""
    return _updated(conn, "set_sign_up_by_email", {"app_id": app_id, "on": on})


def set_webhook(
    conn: Connection, app_id: UUID, webhook_url: str, secret_keys: Sequence[str]
) -> str | None:
    """Send a live app's events to `webhook_url` (validated by the caller).

    Returns the new `whsec_` secret when the app had none (show it once), else
    None; raises LookupError when no live app has this id.
    """
    return _set_signed_url(conn, "set_webhook", app_id, {"webhook_url": webhook_url},
                           secret_keys)


def set_delivery_url(
    conn: Connection, app_id: UUID, delivery_url: str, secret_keys: Sequence[str]
) -> str | None:
    """Deliver a live app's own mail to `delivery_url` (validated by the caller).

    Signed with the app's webhook secret: returns it when the app had none
    (show it once), else None; raises LookupError when no live app has this id.
    """
    return _set_signed_url(conn, "set_delivery_url", app_id, {"delivery_url": delivery_url},
                           secret_keys)


def _set_signed_url(conn: Connection, query: str, app_id: UUID, url: dict[str, str],
                    secret_keys: Sequence[str]) -> str | None:
    """Store a URL that authsvc signs its requests to, with a fresh webhook secret that the
    query keeps only when the app had none: that secret then, else None."""
    secret = new_webhook_secret()
    params = {"app_id": app_id, **url, "webhook_secret": seal_secret(secret_keys, app_id, secret)}
    row = conn.execute(Q[query], params).fetchone()
    if row is None:
        raise LookupError(app_id)
    return secret if row[0] else None


def clear_delivery_url(conn: Connection, app_id: UUID) -> bool:
    """Send a live app's mail through authsvc's transport again; False if unknown."""
    return _updated(conn, "clear_delivery_url", {"app_id": app_id})


def replace_webhook_secret(conn: Connection, app_id: UUID, secret_keys: Sequence[str]) -> str:
    """A new secret for a live app with a webhook or delivery URL; the old one stops at once."""
    secret = new_webhook_secret()
    sealed = seal_secret(secret_keys, app_id, secret)
    if not _updated(conn, "replace_webhook_secret", {"app_id": app_id, "webhook_secret": sealed}):
        raise LookupError(app_id)
    return secret


def clear_webhook(conn: Connection, app_id: UUID) -> bool:
    """Stop a live app's events (pending deliveries fail); False when no live app has this id."""
    return _updated(conn, "clear_webhook", {"app_id": app_id})


def rotate_key(conn: Connection, app_id: UUID) -> str | None:
    """A new API key for a live app (the old one stops working at commit); None if unknown."""
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    if not _updated(conn, "rotate_key", {"app_id": app_id, "key_hash": _hash_key(key)}):
        return None
    return key


def revoke_app(conn: Connection, app_id: UUID) -> bool:
    """End a live app: its key stops working and its events stop; False if unknown."""
    return _updated(conn, "revoke_app", {"app_id": app_id})
