"""The per-message words an email template prints: who asked, when a link expires, the brand.

All in the email's locale, from the same `emails` catalog as the templates;
the template escapes them for HTML (except the brand's own pieces, built
escaped here once per brand and locale).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import lru_cache

from babel.dates import format_date, format_time, get_datetime_format
from markupsafe import Markup

from authsvc.apps.brands import Brand, shown_product_name
from authsvc.emails.compose import translate
from authsvc.locales import babel_locale

DEFAULT_BRAND_COLOR = "#1a56db"

# What a mail client would make a link of in an app's name: a scheme's colon,
# a path's slashes, an address's @, and a dot inside a word (a host name);
# the Unicode full stops browsers read as dots count as dots. A dot before a
# space or at the end ("Shop Inc.") stays.
_LINK_PUNCTUATION = re.compile(r"[:/\\@]|[.\u3002](?=\S)")
MAX_APP_NAME_SHOWN = 100


def shown_app_name(name: str) -> str:
    """An app's name as an email may show it: one line of plain words, never a link.

    App names are set by operators and brands' product names by apps, but
    the email goes to someone who did not choose that app, so the name is
    treated as untrusted text: NFKC first (fullwidth and other compatibility
    forms of ':', '/', '@', '.' become the ASCII ones), then hidden, control,
    direction-changing and line-breaking characters and the link punctuation
    above become spaces. HTML escaping is the template's (autoescape).
    """
    words = _LINK_PUNCTUATION.sub(" ", shown_product_name(name)).split()
    return " ".join(words)[:MAX_APP_NAME_SHOWN].strip()


@lru_cache(maxsize=4096)
def requested_by(app_name: str | None, base_url: str, locale: str) -> str:
    """The sentence that names who asked for this email (SPEC §14 "Whose account").

    An app's API call (`app_name` not None): that app, by name, whether or not
    the email is in its brand. Otherwise authsvc's own pages at `base_url`.
    """
    if app_name is None:
        return translate(locale, "Requested on %(site)s.") % {"site": base_url}
    name = shown_app_name(app_name)
    if not name:
        return translate(locale, "Requested through an app.")
    return translate(locale, "Requested through the app “%(app)s”.") % {"app": name}


def describe_moment(moment: datetime, locale: str) -> str:
    """A link's expiry to the minute, in the locale's own date and time words, in UTC.

    Said as UTC explicitly ("7 déc. 2026, 09:30 UTC"): the worker does not
    know the reader's zone.
    """
    return _describe_minute(int(moment.timestamp()) // 60, locale)


@lru_cache(maxsize=4096)
def _describe_minute(minute: int, locale: str) -> str:
    # Cached by the minute since the epoch: the links issued in one minute share
    # it (Babel's formatting costs tens of µs; a hit, keyed by an int, under one).
    moment = datetime.fromtimestamp(minute * 60, UTC)
    where = babel_locale(locale)
    time = format_time(moment, "short", tzinfo=UTC, locale=where)
    date = format_date(moment, "medium", locale=where)
    pattern = str(get_datetime_format("medium", locale=where))  # "{1}, {0}": date, time
    return pattern.format(time, date) + " UTC"


def brand_values(brand: Brand, locale: str) -> dict[str, object]:
    """What a template prints of `brand` in `locale`: the same for all its messages.

    The logo is only ever an <img src> in the HTML part (https: checked when
    it was set, apps/brands.py); the support link is a link in HTML and a URL
    in text.
    """
    name = shown_product_name(brand.product_name)
    color = brand.brand_color or DEFAULT_BRAND_COLOR
    logo = Markup("")
    if brand.logo_url:
        logo = Markup('<img src="{}" alt="" height="32" style="height: 32px; vertical-align:'
                      ' middle; margin-inline-end: .5em; border: 0;">').format(brand.logo_url)
    footer, text_footer = Markup(""), f"-- \n{name}"
    if brand.support_url:
        words = translate(locale, "Questions? %(product)s can help:") % {"product": name}
        footer = Markup('<p style="font-size: .9em; color: #555;">{} <a href="{}" dir="ltr">'
                        "{}</a></p>").format(words, brand.support_url, brand.support_url)
        text_footer += f"\n{words} {brand.support_url}"
    return {"product_name": name, "brand_color": color, "logo_url": brand.logo_url,
            "support_url": brand.support_url, "brand_logo": logo, "brand_footer": footer,
            "text_footer": text_footer}
