"""What an app's own accounts' emails look like, as the worker needs it: the app's brand and
its templates, loaded together and kept for a short while per app, each template compiled
when an email first needs it.

One query pair per app every TTL seconds instead of one per email: an app
that changes its brand or a template sees its emails change within the TTL.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from uuid import UUID

import psycopg

from authsvc.apps.brands import Brand, load_brand
from authsvc.db.connections import connect
from authsvc.emails import app_templates
from authsvc.emails.app_templates import StoredTemplate
from authsvc.emails.compose import EmailTemplate, app_template
from authsvc.emails.wording import brand_values
from authsvc.locales import choose_locale
from authsvc.observability.logs import log_event

log = logging.getLogger(__name__)
TTL_SECONDS = 30.0


@dataclass(frozen=True)
class AppLook:
    """An app's brand and its stored templates by (kind, lower-case locale), each compiled
    the first time an email looks it up (`template_for`), not when the look is loaded: a
    look read only for its brand (the asking app's default locale) compiles nothing, and
    an app's many templates cost only those its emails use."""

    brand: Brand
    sources: Mapping[tuple[str, str], StoredTemplate] = field(default_factory=dict)
    # The built-in templates compiled in this brand, by (kind, locale), filled as the
    # worker meets them (worker/render.py Renderer.builtin): kept with the look, so
    # finding one costs a lookup by two strings, not a hash of the whole brand.
    builtins: dict[tuple[str, str], EmailTemplate] = field(default_factory=dict,
                                                            compare=False)
    # The app's templates compiled so far; None for one refused (the built-in is used).
    compiled: dict[tuple[str, str], EmailTemplate | None] = field(default_factory=dict,
                                                                  compare=False)
    _compiling: threading.Lock = field(default_factory=threading.Lock, compare=False,
                                       repr=False)

    @classmethod
    def of(cls, brand: Brand, stored: Iterable[StoredTemplate]) -> AppLook:
        return cls(brand, {(t.kind, t.locale.lower()): t for t in stored})

    def same_as(self, other: AppLook) -> bool:
        """The same brand and the same stored templates: what `other` compiled holds here."""
        return self.brand == other.brand and self.sources == other.sources

    def template_for(self, kind: str, locale: str,
                     requested: str | None = None) -> EmailTemplate | None:
        """SPEC §14's lookup, but for the built-in last: the app's template for the
        request's own tag (`requested`, where it is not a shipped locale) and its language,
        for `locale` and its language, for the app's default locale; None for the built-in."""
        if not self.sources:
            return None
        tags = [t.lower() for t in (requested, locale) if t]
        candidates = [c for tag in tags for c in (tag, tag.split("-")[0])]
        for candidate in dict.fromkeys([*candidates,
                                        (self.brand.default_locale or "").lower()]):
            if (kind, candidate) in self.sources:
                found = self._compiled(kind, candidate)
                if found is not None:
                    return found
        return None

    def _compiled(self, kind: str, locale: str) -> EmailTemplate | None:
        key = (kind, locale)
        if key in self.compiled:
            return self.compiled[key]
        with self._compiling:  # one thread compiles; the others wait for its result
            if key not in self.compiled:
                self.compiled[key] = _compile(self.brand, self.sources[key])
            return self.compiled[key]


def _compile(brand: Brand, stored: StoredTemplate) -> EmailTemplate | None:
    """An app's stored template compiled in the sandbox, or None (logged) if it is refused
    or fails in any way: an app's template never stops the worker; its emails go out with
    the built-in one instead."""
    try:
        return app_template(
            stored.kind, stored.locale, stored.subject, stored.text, stored.html,
            # Its words (the support line) in the shipped locale nearest to
            # the template's: an app may store a language authsvc does not ship.
            brand_values(brand, choose_locale(stored.locale)))
    except Exception as exc:  # stored some other way, or a bug: never used
        log_event(log, "app_template_refused", level=logging.WARNING,
                  app_id=str(brand.app_id), kind=stored.kind, locale=stored.locale,
                  error=f"{type(exc).__name__}: {exc}")
        return None


def load_look(conn: psycopg.Connection, app_id: UUID, service_product_name: str) -> AppLook:
    """`app_id`'s brand and stored templates as they are now (the service's brand if it is
    gone); the templates compile when first looked up."""
    brand = load_brand(conn, app_id, service_product_name)
    if brand.app_id is None:
        return AppLook(brand)
    return AppLook.of(brand, app_templates.list_templates(conn, app_id))


class LooksUnavailable(Exception):
    """An app's look could not be read (the database is away): retry the email later
    rather than send an app's own account a message in the wrong brand."""


class AppLooks:
    """A per-process cache of AppLook by app, each kept TTL_SECONDS; safe across threads.

    One thread at a time loads an app: the others use the look it had a moment
    ago meanwhile, or wait for the load when there is none yet. A look that
    reads the same as the one before is kept, with what it has compiled.
    """

    def __init__(self, load: Callable[[UUID], AppLook], ttl: float = TTL_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._load = load
        self._ttl = ttl
        self._clock = clock
        self._cache: dict[UUID, tuple[float, AppLook]] = {}
        self._locks: dict[UUID, threading.Lock] = {}
        self._locks_lock = threading.Lock()

    def _lock(self, app_id: UUID) -> threading.Lock:
        with self._locks_lock:
            return self._locks.setdefault(app_id, threading.Lock())

    def get(self, app_id: UUID) -> AppLook:
        cached = self._cache.get(app_id)
        if cached is not None and cached[0] > self._clock():
            return cached[1]
        lock = self._lock(app_id)
        if not lock.acquire(blocking=cached is None):
            assert cached is not None
            return cached[1]  # another thread is loading it
        try:
            return self._refresh(app_id)
        finally:
            lock.release()

    def _refresh(self, app_id: UUID) -> AppLook:
        now = self._clock()
        cached = self._cache.get(app_id)
        if cached is not None and cached[0] > now:
            return cached[1]  # loaded while this thread waited
        try:
            look = self._load(app_id)
        except LooksUnavailable:
            if cached is None:
                raise
            return cached[1]  # the look it had a moment ago beats no email
        if cached is not None and cached[1].same_as(look):
            look = cached[1]  # nothing changed: keep what it compiled
        elif cached is not None and cached[1].brand == look.brand:
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
