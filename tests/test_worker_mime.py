"""Cheaper messages (issue 11): the direct builder writes what the stdlib builder wrote."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone
from email import policy
from email.parser import BytesParser
from email.utils import format_datetime
from typing import Any

import pytest

from authsvc.apps.brands import Brand
from authsvc.config import load_settings
from authsvc.emails.compose import HOLES, _environment, flatten
from authsvc.emails.wording import brand_values
from authsvc.inbox.parsing import parse_message
from authsvc.locales import SUPPORTED_LOCALES
from authsvc.outbox.rules import TEMPLATES as ALL_TEMPLATES
from authsvc.worker.mime import boundary_for, build_message, legacy_message
from tests.worker_support import SAMPLE_PUBLIC_ID, claimed_job, renderer

TEMPLATES = ["verify", "reset", "account_exists", "password_changed"]
PUBLIC_ID = SAMPLE_PUBLIC_ID
LONG = "a-rather-long-local-part-that-makes-the-to-header-fold@" + "sub." * 6 + "example.com"


def _structure(raw: bytes) -> dict[str, Any]:
    message = BytesParser(policy=policy.default).parsebytes(raw)
    parts = [
        (p.get_content_type(), p.get_content_charset(), p["Content-Transfer-Encoding"],
         p.get_content())
        for p in message.iter_parts()
    ]
    return {
        "headers": [(k, str(v)) for k, v in message.items() if k != "Content-Type"],
        "type": message.get_content_type(),
        "parts": parts,
        "defects": [type(d).__name__ for d in message.defects],
    }


def _without_date(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    assert [name for name, _ in headers].count("Date") == 1
    return [(name, value) for name, value in headers if name != "Date"]


@pytest.mark.parametrize("template", TEMPLATES)
@pytest.mark.parametrize("recipient", ["ann@example.com", LONG, "jörg@exämple.com"])
@pytest.mark.parametrize("mail_from", ["authsvc <no-reply@localhost>",
                                       "Jörg's Support <help@example.com>"])
def test_the_message_matches_the_stdlib_builder(env, template, recipient, mail_from):
    """Byte for byte (same boundary), for the fast path and every fallback case."""
    settings = load_settings(env, AUTHSVC_MAIL_FROM=mail_from)
    job = claimed_job(template, recipient)
    built = renderer(settings)
    headers, text, html = built.parts(job)
    email = built.render(job)
    utf8 = email.needs_smtputf8

    random.seed(1234)
    fast = build_message(headers, text, html, utf8=utf8)
    random.seed(1234)
    old = legacy_message(headers, text, html, utf8=utf8)
    assert fast == old
    given = boundary_for(PUBLIC_ID.int)
    assert build_message(headers, text, html, utf8=utf8, boundary=given) == legacy_message(
        headers, text, html, utf8=utf8, boundary=given)
    mine, theirs = _structure(email.data), _structure(old)
    # render() and parts() each stamp their own Date: a second may pass between them.
    assert _without_date(mine["headers"]) == _without_date(theirs["headers"])
    assert mine["parts"] == theirs["parts"]
    assert mine["type"] == "multipart/alternative" and mine["defects"] == []
    [plain, rich] = mine["parts"]
    assert plain == ("text/plain", "utf-8", "base64", text)
    assert rich == ("text/html", "utf-8", "base64", html)
    assert all(len(line) <= 998 for line in email.data.split(b"\r\n"))  # RFC 5322 limit
    assert b"\n" not in email.data.replace(b"\r\n", b"")
    if utf8:
        assert recipient.encode() in email.data, "SMTPUTF8 headers carry the address as UTF-8"


@pytest.mark.parametrize("template", TEMPLATES)
def test_the_test_inbox_reads_the_message(env, template):
    settings = load_settings(env)
    email = renderer(settings).render(claimed_job(template, "ann@example.com"))
    parsed = parse_message(email.data)
    assert parsed.subject and parsed.message_id == f"<authsvc-job-{PUBLIC_ID}@localhost>"
    assert parsed.text and parsed.html and parsed.headers["x-authsvc-job"] == [str(PUBLIC_ID)]
    if template in ("verify", "reset"):
        assert any("token=" in link for link in parsed.links)
        assert "a=1&b=%3C2%3E&token=" in parsed.text, "the text part is not HTML-escaped"
        assert "a=1&amp;b=%3C2%3E&amp;token=" in parsed.html


@pytest.mark.parametrize("locale", SUPPORTED_LOCALES)
@pytest.mark.parametrize("name", [f"{t}.{k}" for t in ALL_TEMPLATES for k in ("txt", "html")])
def test_templates_compiled_once_render_as_jinja_does(name, locale):
    html = name.endswith(".html")
    environment = _environment(locale, html)
    constants = {"base_url": "http://b", "login_url": "http://b/login",
                 "reset_url": "http://b/reset", "signup_url": "http://b/signup",
                 "locale": locale, "dir": "ltr",
                 **brand_values(Brand("<b>Shop</b>", "https://x.test/l.png", "#aa0000",
                                      "https://x.test/help"), locale)}
    context = {key: f"<{key}> & \"'x'\" {{0}} %s {{{key}}}" for key in HOLES}
    template = environment.get_template(name)
    assert flatten(template, constants, html=html)(context) == (
        template.render({**constants, **context})
    )
    with pytest.raises(KeyError):
        flatten(template, constants, html=html)({})


def test_the_date_header_is_what_format_datetime_writes_for_each_moment(env):
    """Formatted once a second: each moment still gets its own second and zone."""
    moments = [datetime(2026, 12, 7, 9, 0, 0, 10, tzinfo=UTC),
               datetime(2026, 12, 7, 9, 0, 0, 999_999, tzinfo=UTC),
               datetime(2026, 12, 7, 9, 0, 1, tzinfo=UTC),
               datetime(2026, 12, 7, 10, 0, 1, tzinfo=timezone(timedelta(hours=1))),  # same instant
               datetime(2026, 12, 7, 9, 0, 1, tzinfo=UTC),
               datetime(2026, 12, 7, 8, 59, 59, tzinfo=UTC)]  # a clock stepped back
    now = iter(moments)
    built = renderer(load_settings(env), lambda: next(now))
    assert [built._date() for _ in moments] == [format_datetime(m) for m in moments]


@pytest.mark.parametrize("recipient", ["ann@example.com", LONG, "jörg@exämple.com"])
def test_a_retried_message_is_the_same_bytes_but_for_its_date(env, recipient):
    """Same Message-ID, same boundary, same bodies: only the Date line may differ."""
    moments = iter([datetime(2026, 12, 7, 9, tzinfo=UTC), datetime(2026, 12, 7, 9, 5, tzinfo=UTC)])
    built = renderer(load_settings(env), lambda: next(moments))
    job = claimed_job("verify", recipient)
    first, retry = built.render(job), built.render(job._replace(attempt_count=2))

    def undated(data: bytes) -> list[bytes]:
        return [line for line in data.split(b"\r\n") if not line.startswith(b"Date: ")]

    assert first.data != retry.data and undated(first.data) == undated(retry.data)
    assert parse_message(retry.data).message_id == first.message_id
