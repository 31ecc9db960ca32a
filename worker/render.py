"""Turn a claimed job into a ready-to-send message: mint the link, render, build.

The link is minted here, at send time, from the version and issued_at kept
on the row; no usable token is ever stored.
"""

from __future__ import annotations

from datetime import datetime
from email import policy as email_policy
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from email.utils import format_datetime, parseaddr
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import jinja2

from authsvc.addresses import is_canonical
from authsvc.clock import Clock, system_clock
from authsvc.config import Settings
from authsvc.resources import templates_dir
from authsvc.tokens import TokenClaims, TokenCodec
from worker.jobs import ClaimedJob
from worker.mailers import OutgoingEmail, needs_smtputf8

SUBJECTS = {
    "verify": "Confirm your email address",
    "reset": "Reset your password",
    "account_exists": "You already have an account",
    "password_changed": "Your password was changed",
}
LINK_PATHS = {"verify": "/verify", "reset": "/reset/confirm"}


class TemplateError(Exception):
    """The job cannot be rendered; retrying will not fix it."""


def with_token(url: str, token: str) -> str:
    """`url` with token=… added to its query, keeping what is already there."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "token"]
    query.append(("token", token))
    return urlunsplit(parts._replace(query=urlencode(query)))


def describe_duration(seconds: int) -> str:
    """'30 minutes', '24 hours', '1 day and 2 hours' for the expiry sentence."""
    units = (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))
    parts = []
    for name, size in units:
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count} {name}{'s' if count != 1 else ''}")
    return " and ".join(parts[:2]) or "0 seconds"


def message_domain(mail_from: str) -> str:
    """The domain of the sender address, used in every Message-ID."""
    address = parseaddr(mail_from)[1]
    return address.rpartition("@")[2] or "localhost"


def message_id_for(job_id: int, domain: str) -> str:
    """Stable per job, never per attempt: a re-send carries the same Message-ID."""
    return f"<authsvc-job-{job_id}@{domain}>"


class Renderer:
    """Builds the message for a job; one instance per process, safe across threads."""

    def __init__(self, settings: Settings, codec: TokenCodec, clock: Clock = system_clock) -> None:
        self.settings = settings
        self.codec = codec
        self.clock = clock
        self.sender = parseaddr(settings.mail_from)[1]
        self.domain = message_domain(settings.mail_from)
        loader = jinja2.FileSystemLoader(str(templates_dir() / "email"))
        strict = jinja2.StrictUndefined
        self._html = jinja2.Environment(loader=loader, autoescape=True, undefined=strict)
        # Plain-text parts are not HTML: escaping would corrupt links with '&'.
        self._text = jinja2.Environment(loader=loader, autoescape=False, undefined=strict)  # noqa: S701

    def link_expires_at(self, job: ClaimedJob) -> datetime | None:
        if job.purpose is None or job.issued_at is None:
            return None
        return self.codec.expires_at(job.purpose, job.issued_at)

    def _context(self, job: ClaimedJob) -> dict[str, object]:
        base = self.settings.base_url
        context: dict[str, object] = {
            "recipient": job.recipient,
            "base_url": base,
            "reset_url": base + "/reset",
            "login_url": base + "/login",
        }
        if job.purpose is not None:
            assert job.user_id is not None and job.token_version is not None
            assert job.issued_at is not None
            claims = TokenClaims(job.user_id, job.purpose, job.token_version, job.issued_at)
            target = job.payload.get("redirect_url") or base + LINK_PATHS[job.purpose]
            expires_at = self.codec.expires_at(job.purpose, job.issued_at)
            context.update(
                link=with_token(str(target), self.codec.mint(claims)),
                expires_at=expires_at.strftime("%Y-%m-%d %H:%M UTC"),
                valid_for=describe_duration(self.codec.ttl(job.purpose)),
            )
        return context

    def render(self, job: ClaimedJob) -> OutgoingEmail:
        """The complete message for `job`; TemplateError if it cannot be built."""
        if not is_canonical(job.recipient):
            # Mail goes to exactly the stored address or nowhere: a row the
            # parser would not produce (written before it, or by hand) could
            # make the SMTP client deliver elsewhere.
            raise TemplateError("recipient is not one plain, canonical address; not sent")
        try:
            context = self._context(job)
            text = self._text.get_template(f"{job.template}.txt").render(context)
            html = self._html.get_template(f"{job.template}.html").render(context)
        except (jinja2.TemplateError, KeyError, AssertionError) as exc:
            raise TemplateError(f"{job.template}: {type(exc).__name__}: {exc}") from None
        message_id = message_id_for(job.id, self.domain)
        # The legacy email.mime classes build a two-part message about four
        # times faster than EmailMessage, and the builder is the worker's
        # first bottleneck.
        message = MIMEMultipart("alternative")
        message["From"] = self.settings.mail_from
        message["To"] = job.recipient
        message["Subject"] = SUBJECTS[job.template]
        message["Date"] = format_datetime(self.clock())
        message["Message-ID"] = message_id
        message["X-Authsvc-Job"] = str(job.id)
        if job.token_version is not None:
            message["X-Authsvc-Token-Version"] = str(job.token_version)
        message.attach(MIMEText(text, "plain", "utf-8"))
        message.attach(MIMEText(html, "html", "utf-8"))
        # compat32 would turn a non-ASCII address into an RFC 2047 encoded-word,
        # which is not an address; an SMTPUTF8 message carries it as UTF-8
        # (RFC 6532), and the mailer sends it only to servers offering SMTPUTF8.
        utf8 = needs_smtputf8(self.sender, job.recipient)
        try:
            data = message.as_bytes(policy=email_policy.SMTPUTF8 if utf8 else None)
        except UnicodeError as exc:
            raise TemplateError(f"{job.template}: cannot encode the message: {exc}") from None
        data = data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        return OutgoingEmail(job.id, self.sender, job.recipient, message_id, data)
