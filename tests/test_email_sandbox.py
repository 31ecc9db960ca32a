"""The sandbox of apps' templates (authsvc/emails/sandbox.py) and the one render path.

Upload refusals are tested through the API (test_brands_and_templates.py);
here: the render bounds themselves, the sandbox as a second wall behind the
whitelist, and that an app's plain template and a built-in one fill the same
way.
"""

from __future__ import annotations

import time

import jinja2
import pytest

from authsvc.apps.brands import Brand
from authsvc.emails import sandbox
from authsvc.emails.compose import app_template, render_parts
from authsvc.emails.wording import brand_values, shown_product_name

CONTEXT = {"email": "a@example.com", "link": "https://x.test/?token=t&a=1", "code": "123456",
           "code_url": "https://x.test/code", "expires_in": "1 hour",
           "expires_at": "Dec 7, 2026, 9:30 AM UTC", "requested_by": ""}


def _constants(name: str = "Shop") -> dict[str, object]:
    return brand_values(Brand(name, "https://x.test/l.png", "#aa0000", None), "en")


def test_a_render_past_100_ms_is_stopped():
    # A template the whitelist would refuse (a loop and a call), rendered through the bound
    # directly: each piece is quick, together they are not. The bound is checked between
    # pieces; the whitelist is what keeps each piece's cost bounded by its source.
    slow = jinja2.Environment().from_string(  # noqa: S701 - text, never HTML
        "{% for i in range(1000) %}{{ pause() }}{% endfor %}")
    def pause() -> str:
        time.sleep(0.002)
        return "."

    began = time.perf_counter()
    with pytest.raises(sandbox.RenderLimit, match="ms"):
        sandbox.bounded_render(slow)({"pause": pause})
    # The whole loop takes 2 s or more: well under that proves the bound stopped it,
    # with room for a busy machine.
    assert time.perf_counter() - began < 1.5


def test_a_render_past_256_kib_is_stopped():
    big = jinja2.Environment().from_string(  # noqa: S701 - text, never HTML
        "{% for i in range(10**6) %}xxxxxxxxxxxxxxxx{% endfor %}")
    with pytest.raises(sandbox.RenderLimit, match="characters"):
        sandbox.bounded_render(big)({})


def test_a_plain_template_repeating_a_value_past_the_bound_is_stopped():
    text = "{{ link }}" * 6000 + "{{ code }}"  # under 64 KiB of source
    template = app_template("reset", "en", "s", text, "{{ link }}{{ code }}", _constants())
    with pytest.raises(sandbox.RenderLimit):
        render_parts(template, {**CONTEXT, "link": "https://x.test/?token=" + "t" * 60})


@pytest.mark.parametrize("source", ["{{ ''.__class__ }}", "{{ link.__class__.__mro__ }}",
                                    "{{ range(3) }}", "{{ lipsum }}"])
def test_the_sandbox_holds_behind_the_whitelist(source):
    """Were the whitelist bypassed (a row written by hand), Jinja's sandbox with no globals
    still renders nothing of Python's insides."""
    env = sandbox.sandbox_environment(html=False)
    with pytest.raises((jinja2.exceptions.SecurityError, jinja2.UndefinedError)):
        env.from_string(source).render(CONTEXT)


def test_conditions_and_filters_render_bounded_and_escaped():
    html = ("{% if support_url %}help{% else %}no help{% endif %} {{ product_name|upper }}"
            " {{ link }} {{ code }}")
    template = app_template("verify", "de", "{{ product_name }}", "{{ link }} {{ code }}",
                            html, _constants("<b>Shop</b>"))
    subject, _text, rendered = render_parts(template, CONTEXT)
    assert subject == "<b>Shop</b>"  # a header, not HTML
    assert "no help &lt;B&gt;SHOP&lt;/B&gt; https://x.test/?token=t&amp;a=1 123456" in rendered
    assert rendered.startswith('<!doctype html>\n<html lang="de" dir="ltr">')


def test_a_product_name_cannot_reorder_or_hide_text():
    assert shown_product_name("Shop\u202e\u200bmoc.live\n") == "Shop moc.live"
    assert shown_product_name("\u2067Shop\u2069\u202dx\u202c") == "Shop x"
    name = "<script>x</script>\u202eevil\u2066"
    template = app_template("verify", "en", "{{ product_name }}",
                            "{{ product_name }} {{ link }} {{ code }}",
                            "{{ product_name }} {{ link }} {{ code }}", _constants(name))
    subject, text, html = render_parts(template, CONTEXT)
    assert (subject, text.split(" https")[0]) == ("<script>x</script> evil",) * 2
    assert html.count("&lt;script&gt;x&lt;/script&gt; evil") == 1 and "<script>" not in html
    for part in (subject, text, html):
        assert "\u202e" not in part and "\u2066" not in part


def test_the_built_in_frame_isolates_the_product_name():
    """The built-in HTML shows the name in <bdi>: even a name without controls (an Arabic
    one, say) cannot pull the words next to it into its direction."""
    from authsvc.emails.compose import builtin_template
    template = builtin_template("verify", "en", _constants("<b>\u202eمتجر</b>"))
    _subject, text, html = render_parts(template, CONTEXT)
    assert "<bdi>&lt;b&gt; متجر&lt;/b&gt;</bdi>" in html
    assert "\u202e" not in text + html


def test_an_unset_brand_field_is_unset_to_the_filters():
    """An app that set no support URL or logo: `default` gives its fallback, and every
    other filter sees an empty value (never the word "None")."""
    unset = brand_values(Brand("Shop"), "en")
    template = app_template(
        "verify", "en", "{{ support_url|default('no help') }}",
        "{{ logo_url|upper }}|{{ support_url|default('none') }}|{{ logo_url|trim"
        "|capitalize|title|lower }}|{{ link }} {{ code }}",
        "<p>{{ logo_url|e }}|{{ support_url|default('<x>') }}|{{ logo_url|escape }}</p>"
        "{{ link }} {{ code }}", unset)
    subject, text, html = render_parts(template, CONTEXT)
    assert subject == "no help"
    assert text.startswith("|none||https://")
    assert "<p>|&lt;x&gt;|</p>https:" in html
    # A set one is kept by `default`, and filtered as it is.
    shown = app_template("verify", "en", "{{ support_url|default('no help') }}",
                         "{{ support_url|upper }} {{ link }} {{ code }}",
                         "{{ link }} {{ code }}",
                         brand_values(Brand("Shop", support_url="https://help.test"), "en"))
    subject, text, _html = render_parts(shown, CONTEXT)
    assert subject == "https://help.test" and text.startswith("HTTPS://HELP.TEST ")


@pytest.mark.parametrize(("html", "locale", "root"), [
    ("<html><body>{{ link }} {{ code }}</body></html>", "de",
     '<html lang="de" dir="ltr"><body>'),
    ("<!DOCTYPE html>\n<HTML class='mail'>\n<p>{{ link }} {{ code }}</p>", "ar",
     '<!DOCTYPE html>\n<HTML class=\'mail\' lang="ar" dir="rtl">\n<p>'),
    ('<html lang="ar-EG">{{ link }} {{ code }}</html>', "ar-EG",
     '<html lang="ar-EG" dir="rtl">'),
    ('<html dir="ltr" class="x">{{ link }} {{ code }}</html>', "he",
     '<html dir="ltr" class="x" lang="he">'),
    ("<!doctype html><p>{{ link }} {{ code }}</p>", "fr",
     '<!doctype html><html lang="fr" dir="ltr"><p>'),
    ("<p>{{ link }} {{ code }}</p>", "fa", '<!doctype html>\n<html lang="fa" dir="rtl">'),
])
def test_every_html_part_says_its_language_and_direction(html, locale, root):
    """An app's HTML part with its own root but no lang or dir gets them, as a part
    without a root gets the whole document (Content-Language's <html lang dir>)."""
    template = app_template("verify", locale, "s", "{{ link }} {{ code }}", html,
                            _constants())
    _subject, _text, rendered = render_parts(template, CONTEXT)
    assert rendered.startswith(root), rendered
