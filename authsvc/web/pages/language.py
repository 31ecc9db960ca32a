"""Which language a page is in (SPEC §14), how the choice is remembered, and the switcher.

One rule, `choose_page_locale`: a well-formed `?lang=` (remembered in the
`lang` cookie), else that cookie, else the browser's `Accept-Language`, else
the default locale of the brand the page shows (a link's app), else `en`.
Nothing here ever refuses a request: a malformed `?lang=` or cookie is
ignored, and `Accept-Language` is only read as far as it makes sense.

The choice is made once per request and kept on `flask.g` (a brand learned
from a link's token makes it again); the after-request hook then says which
language the page is in (`Content-Language`, `Vary`) and sets the cookie.
The operator console renders with the same choice and the same switcher.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import quote, urlencode

from flask import Blueprint, Response, g, has_request_context, request

from authsvc.locales import (
    DEFAULT_LOCALE,
    SUPPORTED_LOCALES,
    choose_locale,
    from_accept_language,
    parse_locale_tag,
    supported_locale,
    text_direction,
)
from authsvc.web.plumbing import services

LANG_PARAMETER = "lang"
LANG_COOKIE = "lang"
# A person's language outlives sessions; a year, renewed each time it is chosen.
LANG_COOKIE_MAX_AGE = timedelta(days=365)
# What the switcher calls each language: its own name, in its own language.
NATIVE_NAMES = {
    "en": "English",
    "de": "Deutsch",
    "fr": "Français",
    "es": "Español",
    "pt-BR": "Português (Brasil)",
    "ar": "العربية",
}


def _well_formed_supported(value: str | None) -> str | None:
    """The shipped locale a `?lang=` or cookie value asks for; None if malformed or unmapped."""
    if value is None:
        return None
    try:
        return supported_locale(parse_locale_tag(value))
    except ValueError:
        return None


def _asked_for(
    *, query: str | None, cookie: str | None, accept_language: str | None,
) -> str | None:
    """The shipped locale the person asked for: the query's, the cookie's, the browser's."""
    return (_well_formed_supported(query) or _well_formed_supported(cookie)
            or from_accept_language(accept_language))


def choose_page_locale(
    *, query: str | None, cookie: str | None, accept_language: str | None,
    brand_default: str | None,
) -> str:
    """The page's locale: the query's, the cookie's, the browser's, the brand's, else `en`."""
    return choose_locale(
        _asked_for(query=query, cookie=cookie, accept_language=accept_language),
        brand_default,
    )


def _asked_for_in_this_request() -> str | None:
    return _asked_for(
        query=request.args.get(LANG_PARAMETER),
        cookie=request.cookies.get(LANG_COOKIE),
        accept_language=request.headers.get("Accept-Language"),
    )


def _chosen_for_this_request(brand_default: str | None) -> str:
    return choose_locale(_asked_for_in_this_request(), brand_default)


def page_locale() -> str:
    """This request's page locale, chosen on first use and kept on `flask.g`; English
    outside a request (a unit test, a CLI building a page's parts)."""
    if not has_request_context():
        return DEFAULT_LOCALE
    if "page_locale" not in g:
        g.page_locale = _chosen_for_this_request(g.get("page_brand_default_locale"))
    locale: str = g.page_locale
    return locale


def email_locale() -> str | None:
    """The `locale` of the emails a page's form queues: the page's language when the person
    chose it (`?lang=`, the cookie, `Accept-Language`), else None, so that, as for an API
    request without one, the account's locale and then the app's default decide (SPEC §14).
    Every page flow that queues an email asks this, never `flask.g` directly."""
    return _asked_for_in_this_request()


def adopt_brand_default(default_locale: str | None) -> None:
    """The page shows a brand: its default locale now comes before `en` in the choice."""
    g.page_brand_default_locale = default_locale
    g.pop("page_locale", None)


@dataclass(frozen=True)
class LanguageLink:
    """One entry of the language switcher."""

    locale: str
    name: str
    href: str
    current: bool


def switcher_links() -> list[LanguageLink]:
    """The same page in every shipped language: its path and query, `lang` replaced.

    A page answering a POST (a form shown again with its errors) links to the
    same path when it also answers GET, else to the site's start.
    """
    # Always a path on this site: "//evil.example" or "/\\evil.example" (a 404's path is
    # whatever was asked for) would otherwise be a link to another host.
    path = "/" + quote(request.path.lstrip("/\\"))
    methods = (request.url_rule.methods if request.url_rule else None) or set()
    if request.method not in ("GET", "HEAD") and "GET" not in methods:
        path = "/"
    kept = [(key, value) for key, value in request.args.items(multi=True)
            if key != LANG_PARAMETER] if request.method in ("GET", "HEAD") else []
    current = page_locale()
    return [
        LanguageLink(tag, NATIVE_NAMES[tag],
                     f"{path}?{urlencode([*kept, (LANG_PARAMETER, tag)])}", tag == current)
        for tag in SUPPORTED_LOCALES
    ]


def document_language() -> dict[str, str]:
    """`<html lang dir>` of this request's page; the page is then said to be in it."""
    locale = page_locale()
    g.page_rendered_in = locale
    return {"document_lang": locale, "document_dir": text_direction(locale)}


def _say_and_remember(response: Response) -> Response:
    """Content-Language and Vary on a rendered page; the cookie when `?lang=` chose."""
    rendered = g.get("page_rendered_in")
    if rendered is not None:
        response.headers["Content-Language"] = rendered
        response.vary.update(("Accept-Language", "Cookie"))
    elif request.blueprint != "pages":
        return response  # no page: the API, probes, the console's redirects
    # A page, or the pages' redirect (`/?lang=de` on its way to /login).
    asked = _well_formed_supported(request.args.get(LANG_PARAMETER))
    if asked is not None and request.cookies.get(LANG_COOKIE) != asked:
        secure = request.is_secure or services().settings.base_url.startswith("https://")
        response.set_cookie(LANG_COOKIE, asked, max_age=LANG_COOKIE_MAX_AGE, path="/",
                            samesite="Lax", secure=secure, httponly=False)
    return response


def install(bp: Blueprint) -> None:
    """For every request that renders a page, also unknown paths (their 404 is a page)."""
    bp.after_app_request(_say_and_remember)
