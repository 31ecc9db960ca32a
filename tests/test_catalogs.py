"""Every shipped catalog is complete (SPEC §14): each domain, each locale, each message.

Generic over the domains: a domain with a babel-<domain>.cfg and at least one
.po is checked; one with no catalog yet is skipped. For each shipped locale
but English (whose words are the msgids), every message the sources use now
is translated, not fuzzy, keeps its placeholders and its markup, and has
every plural form the locale's rule needs; and its compiled catalog loads.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog, Message
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.pofile import read_po

from authsvc.locales import DEFAULT_LOCALE, SUPPORTED_LOCALES, translations

ROOT = Path(__file__).resolve().parents[1]
CATALOGS = ROOT / "translations"
DOMAINS = sorted(p.stem.removeprefix("babel-") for p in ROOT.glob("babel-*.cfg"))
LOCALES = [tag.replace("-", "_") for tag in SUPPORTED_LOCALES if tag != DEFAULT_LOCALE]
# The keywords `make translations` extracts with (Babel's defaults, the lazy ones, N_ and
# translate(locale, message)'s message).
KEYWORDS = {"_": None, "gettext": None, "ngettext": (1, 2), "_l": None, "lazy_gettext": None,
            "_ln": (1, 2), "lazy_ngettext": (1, 2), "N_": None, "translate": (2,)}
# printf-style named placeholders (%(name)s, %%) and str.format/Jinja ones ({name}).
_PLACEHOLDER = re.compile(r"%\([A-Za-z_][A-Za-z0-9_]*\)[sdr]|%%|\{[A-Za-z_][A-Za-z0-9_]*\}")


def _po(domain: str, locale: str) -> Path:
    return CATALOGS / locale / "LC_MESSAGES" / f"{domain}.po"


def _shipped(domain: str) -> bool:
    return any(_po(domain, locale).exists() for locale in LOCALES)


def _catalog(domain: str, locale: str) -> Catalog:
    path = _po(domain, locale)
    assert path.exists(), f"{domain}: no catalog for {locale} ({path})"
    with path.open("rb") as f:
        return read_po(f, locale=locale)


def _source_msgids(domain: str) -> set[str]:
    """The singular msgids the sources use now, extracted as `make translations` does."""
    with (ROOT / f"babel-{domain}.cfg").open() as cfg:
        method_map, options_map = parse_mapping_cfg(cfg)
    found = set()
    for _file, _line, message, _comments, _context in extract_from_dir(
            str(ROOT), method_map, options_map, keywords=KEYWORDS):
        found.add(message[0] if isinstance(message, tuple) else message)
    return found


def _placeholders(text: str) -> set[str]:
    return set(_PLACEHOLDER.findall(text))


def _tags(text: str) -> list[str]:
    """The markup a message carries, opening and closing, in no particular order."""
    return sorted(re.findall(r"</?[a-z][a-z0-9]*", text))


def _needs_skip(domain: str) -> None:
    if not _shipped(domain):
        pytest.skip(f"no {domain} catalog yet")


def test_the_catalog_folders_are_the_shipped_locales():
    present = {p.name for p in CATALOGS.iterdir() if p.is_dir()}
    assert present <= set(LOCALES), "a catalog for a locale authsvc does not ship"
    assert "pages" in DOMAINS and "emails" in DOMAINS


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("locale", LOCALES)
def test_every_message_is_translated_with_its_placeholders(domain, locale):
    _needs_skip(domain)
    catalog = _catalog(domain, locale)
    problems = []
    for message in catalog:
        if not message.id:
            continue
        problems += _problems(message, catalog.num_plurals)
    assert problems == [], f"{domain}/{locale}:\n" + "\n".join(problems)


def _problems(message: Message, plurals: int) -> list[str]:
    name = repr(message.id if isinstance(message.id, str) else message.id[0])[:90]
    if message.fuzzy:
        return [f"fuzzy: {name}"]
    ids = (message.id,) if isinstance(message.id, str) else message.id
    strings = (message.string,) if isinstance(message.string, str) else tuple(message.string or ())
    if isinstance(message.id, tuple) and len(strings) != plurals:
        return [f"{len(strings)} plural forms of {plurals}: {name}"]
    wanted = set().union(*(_placeholders(i) for i in ids))
    found = []
    for string in strings:
        if not string.strip():
            found.append(f"untranslated: {name}")
            continue
        have = _placeholders(string)
        # A plural form may leave the count unsaid ("one minute"); nothing else may go.
        missing = wanted - have - ({"%(num)s"} if len(ids) > 1 else set())
        if missing or have - wanted:
            found.append(f"placeholders {sorted(have)} for {sorted(wanted)}: {name}")
        if _tags(string) != _tags(ids[0]):
            found.append(f"markup {_tags(string)} for {_tags(ids[0])}: {name}")
    return found


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("locale", LOCALES)
def test_every_message_the_sources_use_is_in_the_catalog(domain, locale):
    _needs_skip(domain)
    shipped = {m.id if isinstance(m.id, str) else m.id[0] for m in _catalog(domain, locale)
               if m.id}
    missing = sorted(_source_msgids(domain) - shipped)
    assert missing == [], f"{domain}/{locale}: run `make translations` and translate {missing}"


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("locale", [tag for tag in SUPPORTED_LOCALES if tag != DEFAULT_LOCALE])
def test_the_compiled_catalog_loads_and_is_current(domain, locale):
    _needs_skip(domain)
    po = _po(domain, locale.replace("-", "_"))
    mo = po.with_suffix(".mo")
    assert mo.exists(), f"{mo} is missing: `make install` compiles the catalogs"
    assert mo.stat().st_mtime >= po.stat().st_mtime, f"{mo} is older than its .po: run make"
    assert translations(locale, domain).gettext("") != ""  # the header: a real catalog
