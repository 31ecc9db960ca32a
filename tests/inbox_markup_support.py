"""One email with markup in every field a sender controls, for the inbox's escaping tests."""

from __future__ import annotations

import smtplib

SCOPE = "xss"
# Each field carries its own payload, so a failure names the field that leaked.
FROM_NAME = "<img src=x onerror=alert('from')>"
TO_NAME = "<script>alert('to-name')</script>"
ENVELOPE_TO = f'"<img src=x onerror=alert(1)>+{SCOPE}"@inbox.test'  # the To column
HEADER_NAME = "X-<script>alert('header-name')</script>"
HEADER_VALUE = "<img src=x onerror=alert('header-value')>"
SUBJECT = "Hi <img src=x onerror=alert('subject')> <script>alert('subject')</script>"
LINK = "https://app.example/?next=<script>alert('link')</script>"
LINK_TEXT = "<img src=x onerror=alert('link-text')>"
EVERY_FIELD = (FROM_NAME, TO_NAME, ENVELOPE_TO, HEADER_NAME, HEADER_VALUE, SUBJECT, LINK)


def hostile_email() -> bytes:
    """Raw bytes: header names and display names as a sender can write them, unencoded."""
    html = (f'<p><a href="{LINK.replace("<", "&lt;").replace(">", "&gt;")}">{LINK_TEXT}</a>'
            "</p>")
    lines = [
        f'From: "{FROM_NAME}" <eve@evil.example>',
        f'To: "{TO_NAME}" <{ENVELOPE_TO}>',
        f"Subject: {SUBJECT}",
        f"{HEADER_NAME}: {HEADER_VALUE}",
        "MIME-Version: 1.0",
        'Content-Type: multipart/alternative; boundary="b"',
        "",
        "--b",
        "Content-Type: text/plain; charset=utf-8",
        "",
        "Your code is 123456.",
        "--b",
        "Content-Type: text/html; charset=utf-8",
        "",
        html,
        "--b--",
        "",
    ]
    return "\r\n".join(lines).encode()


def send_hostile(port: int) -> None:
    with smtplib.SMTP("127.0.0.1", port, timeout=10) as client:
        client.sendmail("eve@evil.example", [ENVELOPE_TO], hostile_email())
