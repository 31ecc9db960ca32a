"""Turn raw SMTP DATA into what a tester reads: headers, text, HTML and links.

Anything may arrive at a test inbox, so nothing here raises on a malformed
message: each part that cannot be decoded is left empty and the raw bytes
are kept beside it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from email import policy
from email.message import EmailMessage, Message
from email.parser import BytesParser
from html.parser import HTMLParser
from typing import TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)

# Characters that end a URL in plain text; trailing punctuation is trimmed after.
_TEXT_URL = re.compile(r"https?://[^\s<>\"'\[\]{}|\\^`]+", re.IGNORECASE)
_TRAILING = ".,;:!?)'\""
# A lone 6-digit number, outside any link or address: a token in a link can hold
# six digits in a row (the UI once showed "859679" from a token above the code),
# and so can a scoped address (ann+<scope>@…, the scope 32 hex digits) above it.
_CODE = re.compile(r"(?<![\w-])\d{6}(?![\d-])")


@dataclass(frozen=True)
class ParsedMessage:
    sender: str | None
    subject: str | None
    message_id: str | None
    headers: dict[str, list[str]]
    text: str | None
    html: str | None
    links: list[str]
    code: str | None = None


def find_code(text: str | None) -> str | None:
    """The first 6-digit code in the text, if any."""
    # Words holding "://" (links) or "@" (addresses) dropped by splitting, which is
    # linear: a regex such as \S+://\S+ backtracks quadratically over a long run of
    # non-space characters.
    words = (word for word in (text or "").split() if "://" not in word and "@" not in word)
    match = _CODE.search(" ".join(words))
    return match.group(0) if match else None


def clean_text(value: str) -> str:
    """Valid UTF-8 text PostgreSQL accepts.

    The email parser keeps 8-bit header bytes (SMTPUTF8) as surrogate escapes;
    re-encoding them restores the UTF-8 the sender wrote. NUL cannot be stored.
    """
    fixed = value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return fixed.replace("\x00", "\ufffd")


def _attempt(produce: Callable[[], T], fallback: T) -> T:
    try:
        return produce()
    except Exception:  # a malformed part must not lose the rest of the message
        return fallback


def _header(message: Message, name: str) -> str | None:
    value = _attempt(lambda: message.get(name), None)
    if value is None:
        return None
    return clean_text(_attempt(lambda: str(value), ""))


def _headers(message: Message) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    items: list[tuple[str, str]] = _attempt(lambda: list(message.raw_items()), [])
    for name, value in items:
        try:
            decoded = str(message.policy.header_fetch_parse(name, value))
        except Exception:  # an undecodable header keeps its raw form
            decoded = str(value)
        found.setdefault(clean_text(name).lower(), []).append(clean_text(decoded))
    return found


def _part_text(part: Message) -> str:
    if isinstance(part, EmailMessage):
        content = _attempt(part.get_content, None)
        if isinstance(content, str):
            return clean_text(content)
    try:
        payload = part.get_payload(decode=True)
    except Exception:  # e.g. a transfer encoding that cannot be undone
        return ""
    if not isinstance(payload, bytes):
        return ""
    charset = _attempt(part.get_content_charset, None) or "utf-8"
    try:
        return clean_text(payload.decode(charset, "replace"))
    except LookupError:  # an unknown charset name
        return clean_text(payload.decode("utf-8", "replace"))


def _bodies(message: Message) -> tuple[str | None, str | None]:
    text: str | None = None
    html: str | None = None
    for part in _attempt(lambda: list(message.walk()), [message]):
        if _attempt(part.is_multipart, False):
            continue
        disposition: str | None = _attempt(part.get_content_disposition, None)
        if disposition == "attachment":
            continue
        kind = _attempt(part.get_content_type, "text/plain")
        if kind == "text/plain" and text is None:
            text = _part_text(part)
        elif kind == "text/html" and html is None:
            html = _part_text(part)
    return text, html


class _HrefCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in {"a", "area"}:
            for name, value in attrs:
                if name == "href" and value:
                    self.hrefs.append(value.strip())


class _VisibleText(HTMLParser):
    """The words a reader sees in an HTML part: no markup, attributes, comments or scripts."""

    # Tags that start a new line on screen; inline ones (<b>, <span>) join their text,
    # so a code styled digit by digit stays one number.
    _BREAKS = frozenset({"br", "p", "div", "li", "tr", "td", "th", "table", "ul", "ol", "hr",
                         "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "section"})
    # Not <head>: its end tag is optional, and what it holds that shows no text
    # (title, style, script) is hidden by its own tag.
    _HIDDEN = frozenset({"script", "style", "title", "template"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._HIDDEN:
            self._hidden += 1
        elif tag in self._BREAKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._HIDDEN:
            self._hidden = max(0, self._hidden - 1)
        elif tag in self._BREAKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.parts.append(data)


def visible_text(html: str) -> str:
    """What an HTML part shows as text (best effort: never raises)."""
    reader = _VisibleText()
    try:
        reader.feed(html)
        reader.close()
    except AssertionError:  # html.parser's verdict on some broken <![...]> sections
        pass  # the text read before it still counts
    return "".join(reader.parts)


def find_links(text: str | None, html: str | None) -> list[str]:
    """http(s) links from the text part and the HTML hrefs, first seen first, no repeats."""
    links: list[str] = []
    for match in _TEXT_URL.finditer(text or ""):
        links.append(match.group(0).rstrip(_TRAILING))
    if html:
        collector = _HrefCollector()
        try:
            collector.feed(html)
            collector.close()
        except AssertionError:  # html.parser's verdict on some broken <![...]> sections
            log.info("inbox_html_unparseable")  # the links found before it still count
        links.extend(h for h in collector.hrefs if h.lower().startswith(("http://", "https://")))
    return list(dict.fromkeys(links))


def parse_message(raw: bytes) -> ParsedMessage:
    """Everything a tester needs from one raw message; never raises."""
    try:
        message = BytesParser(policy=policy.default).parsebytes(raw)
    except Exception:  # not even parseable as a message: keep it as text
        body = clean_text(raw.decode("utf-8", "replace"))
        return ParsedMessage(None, None, None, {}, body, None, find_links(body, None),
                             find_code(body))
    text, html = _bodies(message)
    return ParsedMessage(
        sender=_header(message, "From"),
        subject=_header(message, "Subject"),
        message_id=(_header(message, "Message-ID") or "").strip() or None,
        headers=_headers(message),
        text=text,
        html=html,
        links=find_links(text, html),
        # The text part's code; an HTML-only email's from the text it shows.
        code=find_code(text) if text is not None else find_code(visible_text(html or "")),
    )
