"""Which language a page or an email is in (SPEC §14): the tags we ship and how one is chosen.

One rule for every caller: a requested tag maps to a shipped locale by its
exact tag, else by its language; a chain of candidates takes the first that
maps; `en` ends every chain. An email's chain is `email_locale`.
Malformed tags are the caller's to refuse (`parse_locale_tag`); `Accept-Language`
headers are never refused, only read as far as they make sense.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from babel import Locale, UnknownLocaleError
from babel.support import NullTranslations, Translations

from authsvc.resources import translations_dir

DEFAULT_LOCALE = "en"
# The order the language switcher shows them in.
SUPPORTED_LOCALES = ("en", "de", "fr", "es", "pt-BR", "ar")
RIGHT_TO_LEFT = frozenset({"ar"})
# The gettext domains shipped for every locale: emails' words and pages' words.
DOMAINS = ("emails", "pages")
MAX_LOCALE_TAG_LENGTH = 35  # RFC 5646's longest well-formed tag people use, with room

# A well-formed BCP 47 tag, RFC 5646 section 2.1's syntax: a language (2 or 3 letters with
# up to three extlangs, or 4 to 8 letters), then optional script, region, variants,
# extensions and a private-use part; or a private-use tag alone (`x-…`).
_PRIVATE_USE = r"[Xx](?:-[A-Za-z0-9]{1,8})+"
_LANGTAG = (
    r"(?:[A-Za-z]{2,3}(?:-[A-Za-z]{3}){0,3}|[A-Za-z]{4,8})"  # language, extlangs
    r"(?:-[A-Za-z]{4})?"                # script
    r"(?:-(?:[A-Za-z]{2}|[0-9]{3}))?"   # region
    r"(?:-(?:[A-Za-z0-9]{5,8}|[0-9][A-Za-z0-9]{3}))*"  # variants
    r"(?:-[0-9A-WY-Za-wy-z](?:-[A-Za-z0-9]{2,8})+)*"  # extensions
    rf"(?:-{_PRIVATE_USE})?"
)
_TAG = re.compile(rf"{_LANGTAG}|{_PRIVATE_USE}")
# The grandfathered tags that do not fit the syntax above, taken as they are (the
# regular ones, `zh-min-nan`, `art-lojban`, do fit it).
_IRREGULAR = frozenset({
    "en-gb-oed", "i-ami", "i-bnn", "i-default", "i-enochian", "i-hak", "i-klingon", "i-lux",
    "i-mingo", "i-navajo", "i-pwn", "i-tao", "i-tay", "i-tsu", "sgn-be-fr", "sgn-be-nl",
    "sgn-ch-de",
})


def _well_formed(tag: str) -> bool:
    return tag.isascii() and (_TAG.fullmatch(tag) is not None or tag.lower() in _IRREGULAR)


_BY_LOWER = {tag.lower(): tag for tag in SUPPORTED_LOCALES}
_BY_LANGUAGE = {tag.split("-")[0].lower(): tag for tag in SUPPORTED_LOCALES}


def parse_locale_tag(value: object) -> str:
    """`value` as a well-formed BCP 47 tag (underscores read as hyphens); ValueError if not."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_LOCALE_TAG_LENGTH:
        raise ValueError("locale must be a BCP 47 language tag such as 'de' or 'pt-BR'")
    tag = value.replace("_", "-")
    if not _well_formed(tag):
        raise ValueError(f"locale {value!r} is not a BCP 47 language tag such as 'de' or 'pt-BR'")
    return tag


def supported_locale(tag: str | None) -> str | None:
    """The shipped locale for `tag`: its exact tag, else its language's; None if neither."""
    if not tag:
        return None
    lowered = tag.replace("_", "-").lower()
    return _BY_LOWER.get(lowered) or _BY_LANGUAGE.get(lowered.split("-")[0])


def choose_locale(*candidates: str | None) -> str:
    """The first candidate that maps to a shipped locale, else `en`."""
    for candidate in candidates:
        chosen = supported_locale(candidate)
        if chosen is not None:
            return chosen
    return DEFAULT_LOCALE


def email_locale(requested: str | None, account: str | None, app_default: str | None) -> str:
    """An email's locale (SPEC §14). A request that named a tag: that tag's shipped locale
    (by tag, then by language), else the app's default, else `en`; the account's does not
    come in, as the request named a language. A request that named none: the account's,
    else the app's default, else `en`."""
    if requested:
        return choose_locale(requested, app_default)
    return choose_locale(account, app_default)


_QUALITY = re.compile(r"q=([01](?:\.[0-9]{0,3})?)$")


def from_accept_language(header: str | None) -> str | None:
    """The shipped locale a browser's `Accept-Language` prefers most, or None.

    Junk is skipped, never refused: a range that is not a tag, a bad q, `*`.
    """
    if not header:
        return None
    ranked: list[tuple[float, int, str]] = []
    for position, item in enumerate(header[:1024].split(",")[:32]):
        tag, _, params = item.strip().partition(";")
        quality = 1.0
        if params:
            match = _QUALITY.fullmatch(params.strip().replace(" ", ""))
            if match is None:
                continue
            quality = float(match.group(1))
        chosen = supported_locale(tag.strip()) if _well_formed(tag.strip()) else None
        if chosen is not None and quality > 0:
            ranked.append((-quality, position, chosen))
    return min(ranked)[2] if ranked else None


@lru_cache(maxsize=256)
def text_direction(locale: str) -> str:
    """`rtl` or `ltr`, for `<html dir>`: a shipped locale's, else (an app's template in a
    tag authsvc does not ship, `he`, `fa`) what Babel knows of the tag's script."""
    shipped = supported_locale(locale)
    if shipped is not None:
        return "rtl" if shipped in RIGHT_TO_LEFT else "ltr"
    try:
        known = Locale.parse(locale, sep="-").text_direction
    except (ValueError, TypeError, UnknownLocaleError):
        return "ltr"
    return "rtl" if known == "rtl" else "ltr"


@lru_cache(maxsize=len(SUPPORTED_LOCALES))
def babel_locale(locale: str) -> Locale:
    """Babel's data for a shipped locale: plural rules, dates, durations."""
    return Locale.parse(locale, sep="-")


@lru_cache(maxsize=4 * len(SUPPORTED_LOCALES))
def translations(locale: str, domain: str) -> NullTranslations:
    """The compiled catalog of `domain` for `locale`; English is the msgids themselves."""
    if locale == DEFAULT_LOCALE:
        return NullTranslations()
    folder: Path = translations_dir()
    catalog = Translations.load(str(folder), [locale.replace("-", "_")], domain)
    if not isinstance(catalog, Translations):
        # A shipped locale without its compiled catalog is a broken build, not English.
        raise FileNotFoundError(f"no compiled {domain} catalog for {locale} in {folder}")
    return catalog


class CatalogMissing(RuntimeError):
    """A shipped locale's compiled catalog is not there: the build skipped compiling them."""


def load_catalogs() -> int:
    """Load every shipped catalog now (they are kept), so a broken build fails at start-up
    rather than at the first email or page in that language; CatalogMissing names each
    missing one and the fix. The number of catalogs loaded."""
    missing: list[str] = []
    try:
        folder = str(translations_dir())
    except FileNotFoundError as exc:
        raise CatalogMissing(f"{exc}: {_FIX}") from None
    for locale in SUPPORTED_LOCALES:
        if locale == DEFAULT_LOCALE:
            continue
        for domain in DOMAINS:
            try:
                translations(locale, domain)
            except FileNotFoundError:
                missing.append(f"{locale.replace('-', '_')}/LC_MESSAGES/{domain}.mo")
    if missing:
        raise CatalogMissing(f"compiled catalogs missing in {folder}: {', '.join(missing)};"
                             f" {_FIX}")
    return (len(SUPPORTED_LOCALES) - 1) * len(DOMAINS)


_FIX = ("run `make install`, or `pybabel compile -d translations -D emails` and"
        " `-D pages`")
