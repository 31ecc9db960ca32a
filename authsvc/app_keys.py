"""Embedding apps: API keys (stored hashed) and their redirect allowlists."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit
from uuid import UUID

from psycopg import Connection
from psycopg.rows import class_row

from authsvc.hidden_characters import hides_text
from authsvc.queries import load_queries

Q = load_queries(Path(__file__).parent / "sql" / "apps.sql")
KEY_PREFIX = "ask_"
MAX_REDIRECT_URL_LENGTH = 2048


@dataclass(frozen=True)
class App:
    id: UUID
    name: str
    redirect_urls: list[str]

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
    # A browser resolves dot segments (also percent-encoded ones) before it
    # requests the page, so /app/../admin would leave the allowed path.
    # Servlet containers also drop ";params" first, so "..;" climbs too.
    segments = (segment.split(";")[0] for segment in unquote(target.path).split("/"))
    if any(segment in {".", ".."} for segment in segments):
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


def find_app_by_key(conn: Connection, key: str) -> App | None:
    if not key.startswith(KEY_PREFIX) or len(key) > 200:
        return None
    with conn.cursor(row_factory=class_row(App)) as cur:
        return cur.execute(Q["find_app_by_key_hash"], {"key_hash": _hash_key(key)}).fetchone()
