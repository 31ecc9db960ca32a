"""The two-part (text + HTML) message as bytes: a direct builder, and the stdlib one it mirrors.

Building with the standard library's `email.mime` classes costs several times
everything else a send needs (bench/pipeline_parts.py, 2026-12-07: 476 µs of CPU
a message against 17 for `build_message`, and 103 for the whole render with it),
and nearly all of it goes to header parsing and folding that our short, fixed
headers never need. `build_message` writes the same bytes as `legacy_message`
directly when every header is ASCII and fits on one line (no folding, no
encoded words); anything else — SMTPUTF8 addresses, a non-ASCII display name,
a header longer than a line — goes through the standard library as before.
tests/test_worker_mime.py holds the two to the same output.
"""

from __future__ import annotations

import binascii
import random
import re
import sys
from email import policy as email_policy
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText

# RFC 5322 recommends 78 characters a line; the stdlib folds past that.
MAX_LINE = 78
_BASE64_LINE = 76  # characters per base64 line, 57 bytes each, as email.base64mime writes them


def legacy_message(headers: list[tuple[str, str]], text: str, html: str, *, utf8: bool,
                   boundary: str | None = None) -> bytes:
    """The stdlib's email.mime build (compat32; SMTPUTF8 policy for UTF-8 addresses), CRLF.

    `boundary`: the multipart boundary; None lets the stdlib draw a random one.
    """
    message = MIMEMultipart("alternative", boundary=boundary)
    for name, value in headers:
        message[name] = value
    message.attach(MIMEText(text, "plain", "utf-8"))
    message.attach(MIMEText(html, "html", "utf-8"))
    # compat32 would turn a non-ASCII address into an RFC 2047 encoded-word,
    # which is not an address; an SMTPUTF8 message carries it as UTF-8
    # (RFC 6532), and the mailer sends it only to servers offering SMTPUTF8.
    data = message.as_bytes(policy=email_policy.SMTPUTF8 if utf8 else None)
    return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def _unfolded_lines(headers: list[tuple[str, str]]) -> list[bytes] | None:
    """Each header as one ASCII line, or None if any needs folding or encoding."""
    # Tested and encoded in the one loop, not a test pass and then an encoding
    # pass: 1.2 µs of CPU for seven headers against 2.0.
    lines = []
    for name, value in headers:
        line = f"{name}: {value}"
        if not (line.isascii() and len(line) <= MAX_LINE and "\r" not in value
                and "\n" not in value and value == value.strip()):
            return None
        lines.append(line.encode("ascii"))
    return lines


# Up to 76 characters at a time, the last line shorter: the base64 lines.
_BASE64_LINES = re.compile(rb".{1,%d}" % _BASE64_LINE, re.DOTALL)


def _base64_lines(data: bytes) -> list[bytes]:
    # Encoding the whole body once and cutting every 76 characters gives the
    # same lines as encoding each 57-byte chunk (57 bytes are 76 characters
    # exactly), in one C call instead of one per line; the regex cuts in C
    # too: 5.0 µs of CPU for both parts of a link email against 6.1 for a
    # comprehension of slices.
    return _BASE64_LINES.findall(binascii.b2a_base64(data, newline=False))


_BOUNDARY_DIGITS = len(repr(sys.maxsize - 1))


def boundary_for(number: int) -> str:
    """A multipart boundary of the stdlib's shape (email.generator) from `number`.

    base64 lines cannot contain one (no '-' in the alphabet), so it needs no
    check against the bodies; drawn from the job rather than at random, a
    retried message is the same bytes as the first but for its Date.
    """
    return "=" * 15 + f"{number % 10**_BOUNDARY_DIGITS:0{_BOUNDARY_DIGITS}d}" + "=="


def build_message(headers: list[tuple[str, str]], text: str, html: str, *, utf8: bool,
                  boundary: str | None = None) -> bytes:
    """What `legacy_message` would write; built directly when no header needs folding.

    `boundary`: as for legacy_message; None draws it as the stdlib does, so a
    seeded comparison of the two gives the same bytes.
    """
    header_lines = None if utf8 else _unfolded_lines(headers)
    if header_lines is None:
        return legacy_message(headers, text, html, utf8=utf8, boundary=boundary)
    if boundary is None:
        boundary = boundary_for(random.randrange(sys.maxsize))
    mark = boundary.encode("ascii")
    dashes = b"--" + mark
    lines = [
        b'Content-Type: multipart/alternative; boundary="' + mark + b'"',
        b"MIME-Version: 1.0",
    ]
    if len(lines[0]) > MAX_LINE:  # what the stdlib folds it to
        lines[0:1] = [b"Content-Type: multipart/alternative;",
                      b' boundary="' + mark + b'"']
    lines += header_lines
    lines.append(b"")
    for subtype, body in ((b"plain", text), (b"html", html)):
        lines += [
            dashes,
            b"Content-Type: text/" + subtype + b'; charset="utf-8"',
            b"MIME-Version: 1.0",
            b"Content-Transfer-Encoding: base64",
            b"",
            *_base64_lines(body.encode("utf-8")),
            b"",
        ]
    lines += [dashes + b"--", b""]
    return b"\r\n".join(lines)
