"""Apps' own templates (SPEC §14): the app_templates table, over app_templates.sql.

Stored only after sandbox.check_template accepted them; the worker compiles
them again in the sandbox when it loads an app's look (looks.py), so a row
written any other way is still never trusted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from uuid import UUID

from psycopg import Connection
from psycopg.rows import class_row

from authsvc.db.queries import load_queries
from authsvc.emails import sandbox
from authsvc.locales import SUPPORTED_LOCALES, parse_locale_tag, supported_locale

Q = load_queries(Path(__file__).with_suffix(".sql"))

# The emails that ask the person to act; every other kind (the notices that
# protect the person) always uses its built-in body, under the app's brand.
KINDS = ("verify", "reset", "sign_in", "email_change", "account_delete")
# How many templates an app may store: each kind in every shipped locale and ten more
# tags. What the worker reads per app, and GET /api/v1/templates lists, stays bounded.
MAX_TEMPLATES_PER_APP = len(KINDS) * (len(SUPPORTED_LOCALES) + 10)


@dataclass(frozen=True)
class StoredTemplate:
    kind: str
    locale: str
    subject: str
    text: str
    html: str
    updated_at: datetime


def template_locale(value: str) -> str:
    """A template's locale as stored: a shipped locale's own spelling ('pt-BR'), else the
    tag in lower case; ValueError when it is not a BCP 47 tag."""
    tag = parse_locale_tag(value)
    shipped = supported_locale(tag)
    return shipped if shipped is not None and shipped.lower() == tag.lower() else tag.lower()


def put_template(conn: Connection, app_id: UUID, kind: str, locale: str, *, subject: str,
                 text: str, html: str) -> bool:
    """Check (sandbox.TemplateInvalid, also past MAX_TEMPLATES_PER_APP) and store; True if
    it replaced one. Takes the app's row lock, so two uploads cannot both pass the cap."""
    sandbox.check_template(subject, text, html)
    others = conn.execute(Q["count_other_templates"],
                          {"app_id": app_id, "kind": kind, "locale": locale}).fetchone()
    if others is not None and others[0] >= MAX_TEMPLATES_PER_APP:
        raise sandbox.TemplateInvalid(
            "template", 1, f"this app has {others[0]} templates, at most"
            f" {MAX_TEMPLATES_PER_APP}: delete one, or replace one it has")
    row = conn.execute(Q["put_template"], {
        "app_id": app_id, "kind": kind, "locale": locale, "subject": subject,
        "text": text, "html": html}).fetchone()
    return bool(row and row[0])


def get_template(conn: Connection, app_id: UUID, kind: str, locale: str) -> StoredTemplate | None:
    with conn.cursor(row_factory=class_row(StoredTemplate)) as cur:
        return cur.execute(Q["get_template"],
                           {"app_id": app_id, "kind": kind, "locale": locale}).fetchone()


def list_templates(conn: Connection, app_id: UUID) -> list[StoredTemplate]:
    with conn.cursor(row_factory=class_row(StoredTemplate)) as cur:
        return cur.execute(Q["list_templates"], {"app_id": app_id}).fetchall()


def delete_template(conn: Connection, app_id: UUID, kind: str, locale: str) -> bool:
    row = conn.execute(Q["delete_template"],
                       {"app_id": app_id, "kind": kind, "locale": locale}).fetchone()
    return row is not None
