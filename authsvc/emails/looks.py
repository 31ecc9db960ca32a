"""What an app's own accounts' emails look like, as the worker needs it: the app's brand and
its templates compiled, loaded together and kept for a short while per app.

One query pair per app every TTL seconds instead of one per email: an app
that changes its brand or a template sees its emails change within the TTL.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from uuid import UUID

import psycopg

from authsvc.apps.brands import Brand, load_brand
from authsvc.db.connections import connect
from authsvc.emails import app_templates, sandbox
from authsvc.emails.compose import EmailTemplate, app_template
from authsvc.emails.wording import brand_values
from authsvc.locales import choose_locale
from authsvc.observability.logs import log_event

log = logging.getLogger(__name__)
TTL_SECONDS = 30.0


@dataclass(frozen=True)
class AppLook:
    """An app's brand and its compiled templates by (kind, lower-case locale)."""

    brand: Brand
    templates: dict[tuple[str, str], EmailTemplate] = field(default_factory=dict)
    # The built-in templates compiled in this brand, by (kind, locale), filled as the
    # worker meets them (worker/render.py Renderer.builtin): kept with the look, so
    # finding one costs a lookup by two strings, not a hash of the whole brand.
    builtins: dict[tuple[str, str], EmailTemplate] = field(default_factory=dict,
                                                            compare=False)

    def template_for(self, kind: str, locale: str) -> EmailTemplate | None:
        """SPEC §14's lookup, but for the built-in last: the app's template for `locale`,
        for its language, for the app's default locale; None for the built-in one."""
        if not self.templates:
            return None
        lowered = locale.lower()
        for candidate in (lowered, lowered.split("-")[0],
                          (self.brand.default_locale or "").lower()):
            found = self.templates.get((kind, candidate))
            if found is not None:
                return found
        return None


def load_look(conn: psycopg.Connection, app_id: UUID, service_product_name: str) -> AppLook:
    """`app_id`'s brand and templates as they are now (the service's brand if it is gone)."""
    brand = load_brand(conn, app_id, service_product_name)
    compiled: dict[tuple[str, str], EmailTemplate] = {}
    if brand.app_id is not None:
        for stored in app_templates.list_templates(conn, app_id):
            try:
                compiled[(stored.kind, stored.locale.lower())] = app_template(
                    stored.kind, stored.locale, stored.subject, stored.text, stored.html,
                    # Its words (the support line) in the shipped locale nearest to
                    # the template's: an app may store a language authsvc does not ship.
                    brand_values(brand, choose_locale(stored.locale)))
            except sandbox.TemplateInvalid as exc:  # stored some other way: never used
                log_event(log, "app_template_refused", level=logging.WARNING,
                          app_id=str(app_id), kind=stored.kind, locale=stored.locale,
                          error=str(exc))
    return AppLook(brand, compiled)


class LooksUnavailable(Exception):
    """An app's look could not be read (the database is away): retry the email later
    rather than send an app's own account a message in the wrong brand."""


class AppLooks:
    """A per-process cache of AppLook by app, each kept TTL_SECONDS; safe across threads
    (a race loads an app twice, and the later answer wins)."""

    def __init__(self, load: Callable[[UUID], AppLook], ttl: float = TTL_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._load = load
        self._ttl = ttl
        self._clock = clock
        self._cache: dict[UUID, tuple[float, AppLook]] = {}

    def get(self, app_id: UUID) -> AppLook:
        now = self._clock()
        cached = self._cache.get(app_id)
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            look = self._load(app_id)
        except LooksUnavailable:
            if cached is None:
                raise
            return cached[1]  # the look it had a moment ago beats no email
        if cached is not None and cached[1].brand == look.brand:
            look.builtins.update(cached[1].builtins)  # the same brand: compiled already
        self._cache[app_id] = (now + self._ttl, look)
        return look


def database_looks(url: str, service_product_name: str, ttl: float = TTL_SECONDS) -> AppLooks:
    """AppLooks loading from the database at `url`, one short connection per load."""
    def load(app_id: UUID) -> AppLook:
        try:
            with connect(url, connect_timeout=5) as conn:
                return load_look(conn, app_id, service_product_name)
        except psycopg.OperationalError as exc:
            raise LooksUnavailable(f"app {app_id}'s brand could not be read: {exc}") from None

    return AppLooks(load, ttl)
