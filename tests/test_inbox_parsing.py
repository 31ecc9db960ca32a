"""Whatever arrives at the sink, parsing never raises and yields text PostgreSQL can store."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from authsvc.inbox.parsing import ParsedMessage, parse_message

_HEADER_LINES = st.lists(
    st.sampled_from([
        b"Subject: =?utf-8?b?w6TDtsO8?=", b"Subject: =?x-unknown?q?=FF?=", b"From: \xc3\x28",
        b"Content-Type: multipart/mixed; boundary=B", b"Content-Type: text/html; charset=bogus",
        b"Content-Transfer-Encoding: base64", b"Content-Transfer-Encoding: quoted-printable",
        b"Message-ID: <a@b>", b"To: <\x00>", b"X-Folded: a\r\n\tb", b": no name", b"--B",
        b"<![bogus[ <a href='http://x.example/'>", b"https://y.example/p?q=1.",
    ]),
    max_size=12,
)


def _storable(value: str | None) -> bool:
    if value is None:
        return True
    value.encode("utf-8")  # raises on lone surrogates, which PostgreSQL would refuse
    return "\x00" not in value


def _check(parsed: ParsedMessage) -> None:
    texts = [parsed.sender, parsed.subject, parsed.message_id, parsed.text, parsed.html]
    texts += parsed.links + [v for values in parsed.headers.values() for v in values]
    assert all(_storable(t) for t in texts)
    assert all(link.startswith(("http://", "https://")) for link in parsed.links)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_random_bytes_parse(raw: bytes) -> None:
    _check(parse_message(raw))


@settings(max_examples=300, deadline=None)
@given(_HEADER_LINES, _HEADER_LINES, st.binary(max_size=100))
def test_mime_shaped_garbage_parses(headers: list[bytes], body: list[bytes], tail: bytes) -> None:
    raw = b"\r\n".join(headers) + b"\r\n\r\n" + b"\r\n".join(body) + tail
    _check(parse_message(raw))


def _html_only(html: str) -> bytes:
    return (b"From: a@example.com\r\nSubject: Your code\r\nMIME-Version: 1.0\r\n"
            b"Content-Type: text/html; charset=utf-8\r\n\r\n" + html.encode())


def test_an_html_only_email_has_the_code_of_its_visible_text():
    parsed = parse_message(_html_only(
        "<style>p{margin:0}</style><p>Your code is<br><b>482910</b>.</p>"
        "<p><a href='https://x.test/reset?token=a123456b'>https://x.test/r/654321</a></p>"))
    assert parsed.text is None and parsed.code == "482910"


def test_an_html_only_email_whose_head_is_never_closed_has_its_code():
    """HTML leaves </head> out as often as not: the body's text still counts."""
    parsed = parse_message(_html_only(
        "<html><head><meta charset=utf-8><title>Code 999999</title>"
        "<body><p>Your code 123456</p></body></html>"))
    assert parsed.code == "123456"


def test_an_html_only_code_is_not_taken_from_markup_or_scripts():
    parsed = parse_message(_html_only(
        "<p style='width:123456px'>No code here.</p><script>var c = 111111;</script>"
        "<!-- 222222 --><img alt='' src='cid:333333'>"))
    assert parsed.code is None


def test_the_text_part_still_decides_when_there_is_one():
    raw = (b"From: a@example.com\r\nMIME-Version: 1.0\r\n"
           b"Content-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\n"
           b"Content-Type: text/plain\r\n\r\nNo code in the text.\r\n--b\r\n"
           b"Content-Type: text/html\r\n\r\n<p>Code 777777</p>\r\n--b--\r\n")
    assert parse_message(raw).code is None
