"""The pages' words in the request's language: gettext for Python and Jinja, dates and times.

Babel directly, with Jinja's own i18n extension (newstyle gettext), rather
than Flask-Babel: the worker renders emails with no Flask at all, through the
same `authsvc.locales.translations(locale, domain)` and the same extension,
so pages and emails share one machinery, one catalog layout and one
`make translations`. The pages' catalog is the `pages` domain.

Newstyle gettext formats with `%` and named placeholders
(`_("Sent to %(email)s", email=…)`), escaping the values in templates: a
translation may hold markup, a value never does. A literal percent sign in a
message is written `%%`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from babel.dates import format_date, format_datetime
from babel.support import LazyProxy, NullTranslations
from flask.sansio.app import App

from authsvc.locales import babel_locale, translations
from authsvc.web.pages.language import page_locale

DOMAIN = "pages"


def _catalog() -> NullTranslations:
    return translations(page_locale(), DOMAIN)


# Jinja's newstyle wrappers do the `%` formatting (and the escaping): these only translate.
def _translate(message: str) -> str:
    return _catalog().gettext(message)


def _translate_plural(singular: str, plural: str, count: int) -> str:
    return _catalog().ngettext(singular, plural, count)


def gettext(message: str, **variables: Any) -> str:
    """`message` in the page's language, its `%(name)s` placeholders filled."""
    return _translate(message) % variables


def ngettext(singular: str, plural: str, count: int, **variables: Any) -> str:
    """The plural form for `count` in the page's language; `%(num)s` is the count."""
    variables.setdefault("num", count)
    return _translate_plural(singular, plural, count) % variables


def lazy_gettext(message: str, **variables: Any) -> LazyProxy:
    """Translated when used, not when defined: form labels and messages at import time.

    Never cached: one process answers every language.
    """
    return LazyProxy(gettext, message, enable_cache=False, **variables)


def lazy_ngettext(singular: str, plural: str, count: int, **variables: Any) -> LazyProxy:
    """`ngettext`, translated when used (a rule's message, defined at import time)."""
    return LazyProxy(ngettext, singular, plural, count, enable_cache=False, **variables)


def long_date(moment: datetime) -> str:
    """'7 December 2026', '7. Dezember 2026', '7 de dezembro de 2026' (stored times are UTC)."""
    return format_date(moment, format="long", locale=babel_locale(page_locale()))


def date_time_utc(moment: datetime) -> str:
    """A date and time of day in UTC, in the page's language, saying it is UTC."""
    return format_datetime(moment, format="medium", tzinfo=UTC,
                           locale=babel_locale(page_locale())) + " UTC"


def install(app: App) -> None:
    """Jinja's i18n extension for every template the app renders, bound to the page's language.

    Whitespace inside `{% trans %}` blocks is collapsed (`trimmed`), as the
    extraction in babel-pages.cfg also does, so the msgids match.
    """
    env = app.jinja_env
    env.add_extension("jinja2.ext.i18n")
    env.policies["ext.i18n.trimmed"] = True
    env.install_gettext_callables(  # type: ignore[attr-defined]
        _translate, _translate_plural, newstyle=True)
    env.filters["long_date"] = long_date
    env.filters["date_time_utc"] = date_time_utc
