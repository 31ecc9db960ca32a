"""Choosing a language (SPEC §14): well-formed tags, fallback by language, then `en`."""

from __future__ import annotations

import pytest

from authsvc.locales import (
    choose_locale,
    from_accept_language,
    parse_locale_tag,
    supported_locale,
    text_direction,
)


@pytest.mark.parametrize("tag", [
    "de", "pt-BR", "pt_BR", "zh-Hant-TW", "es-419", "sl-rozaj", "en-US-u-ca-gregory", "AR",
    # RFC 5646's whole syntax: private use, extlangs, 4 to 8 letter languages, grandfathered.
    "x-private", "x-a", "de-DE-x-phonebk", "en-x-a-bc-12345678", "zh-yue-HK", "zh-min-nan",
    "ar-aao-abc-acm", "deutsch-de", "qaaa", "abcdefgh", "i-klingon", "en-GB-oed", "sgn-BE-FR",
    "art-lojban", "I-KLINGON", "de-1996", "sr-Latn-RS-u-nu-latn-x-mine",
])
def test_well_formed_tags_are_accepted(tag: str) -> None:
    assert parse_locale_tag(tag) == tag.replace("_", "-")


@pytest.mark.parametrize("tag", ["", "d", "de-", "-de", "de--DE", "de DE",
                                 "de\x00", "dé", "x" * 36, 7, None, ["de"], "de-DE;q=1",
                                 "../../etc/passwd", "en-US-u", "abcdefghi", "x", "x-", "i-",
                                 "en-x", "en-x-", "x-abcdefghi", "zh-yue-yue-yue-yue",
                                 "i-notgrandfathered", "de-x-a-", "en-u-x-a", "1de"])
def test_malformed_tags_are_refused(tag: object) -> None:
    with pytest.raises(ValueError, match="BCP 47"):
        parse_locale_tag(tag)


@pytest.mark.parametrize(("tag", "shipped"), [
    ("de", "de"), ("de-AT", "de"), ("pt-br", "pt-BR"), ("pt-PT", "pt-BR"), ("pt", "pt-BR"),
    ("ar-EG", "ar"), ("en-GB", "en"), ("fr-CA", "fr"), ("es-419", "es"),
    ("ja", None), ("", None), (None, None),
])
def test_a_tag_maps_by_its_exact_tag_then_its_language(tag: str | None,
                                                       shipped: str | None) -> None:
    assert supported_locale(tag) == shipped


def test_the_chain_takes_the_first_that_maps_and_ends_in_english() -> None:
    assert choose_locale("ja", None, "fr-BE", "de") == "fr"
    assert choose_locale("ja", None) == "en"
    assert choose_locale() == "en"


@pytest.mark.parametrize(("header", "chosen"), [
    ("de-CH,de;q=0.9,en;q=0.8", "de"),
    ("ja,ar;q=0.5,fr;q=0.7", "fr"),
    ("fr;q=0.2, es;q=0.9", "es"),
    ("*", None), ("ja", None), ("", None), (None, None),
    ("de;q=0", None), ("de;q=banana,es", "es"), (";;;,,,===", None), ("\x00\xff", None),
    ("es," * 10_000, "es"), ("pt-BR", "pt-BR"),
])
def test_accept_language_never_errors(header: str | None, chosen: str | None) -> None:
    assert from_accept_language(header) == chosen


def test_arabic_is_right_to_left() -> None:
    assert text_direction("ar") == "rtl"
    assert {text_direction(t) for t in ("en", "de", "fr", "es", "pt-BR")} == {"ltr"}


@pytest.mark.parametrize(("locale", "one", "six", "mixed"), [
    ("en", "1 minute", "6 minutes", "1 hour and 30 minutes"),
    ("de", "1 Minute", "6 Minuten", "1 Stunde und 30 Minuten"),
    ("fr", "1 minute", "6 minutes", "1\xa0heure et 30 minutes"),  # CLDR: no break
    ("es", "1 minuto", "6 minutos", "1 hora y 30 minutos"),
    ("pt-BR", "1 minuto", "6 minutos", "1 hora e 30 minutos"),
    ("ar", "دقيقة", "6 دقائق", "ساعة و30 دقيقة"),
])
def test_durations_take_each_languages_plural_and_its_and(locale: str, one: str, six: str,
                                                           mixed: str) -> None:
    from authsvc.durations import describe_duration
    assert (describe_duration(60, locale), describe_duration(360, locale),
            describe_duration(5400, locale)) == (one, six, mixed)
