"""Turn a claimed job into a ready-to-send message: mint the link, render, build.

The link is minted here, at send time, from the version and issued_at kept
on the row; no usable token is ever stored.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping
from datetime import datetime
from email.utils import format_datetime, parseaddr
from functools import lru_cache
from urllib.parse import SplitResult, parse_qsl, urlencode, urlsplit, urlunsplit
from uuid import UUID

import jinja2
from jinja2 import nodes
from markupsafe import escape

from authsvc.accounts.addresses import is_canonical, masked
from authsvc.accounts.hidden_characters import hides_text
from authsvc.accounts.tokens import TokenClaims, TokenCodec
from authsvc.clock import Clock, system_clock
from authsvc.config import Settings
from authsvc.durations import describe_duration
from authsvc.resources import templates_dir
from authsvc.worker.jobs import ClaimedJob
from authsvc.worker.mailers import OutgoingEmail, needs_smtputf8
from authsvc.worker.mime import build_message

SUBJECTS = {
    "verify": "Confirm your email address",
    "reset": "Reset your password",
    "account_exists": "You already have an account",
    "password_changed": "Your password was changed",
    "email_change": "Confirm your new email address",
    "email_in_use": "An account already uses this address",
    "email_changed": "Your account's email address was changed",
    "email_restored": "This address no longer signs in to your account",
    "account_delete": "Confirm deleting your account",
    "console_code": "Your operator console sign-in code",
}
LINK_PATHS = {
    "verify": "/verify",
    "reset": "/reset/confirm",
    "email_change": "/email-change/confirm",
    "email_revert": "/email-change/undo",
    "account_delete": "/account/delete",
}
# Where a code is typed; the undo link has no code (CODED_PURPOSES).
CODE_PATHS = {
    "verify": "/verify/code",
    "reset": "/reset/code",
    "email_change": "/email-change/code",
    "account_delete": "/account/delete/code",
    # The console's code has no link: it is typed on the page that asked for it.
    "console_login": "/admin/login/code",
}
# Addresses a notice shows masked (n•••@example.com), from the job's payload.
MASKED = {"new_email": "new_email_masked", "restored_email": "restored_email_masked"}


# What a mail client would make a link of in an app's name: a scheme's colon,
# a path's slashes, an address's @, and a dot inside a word (a host name);
# the Unicode full stops browsers read as dots count as dots. A dot before a
# space or at the end ("Shop Inc.") stays.
_LINK_PUNCTUATION = re.compile(r"[:/\\@]|[.\u3002](?=\S)")
MAX_APP_NAME_SHOWN = 100


def shown_app_name(name: str) -> str:
    """An app's name as an email may show it: one line of plain words, never a link.

    App names are set by operators, but the email goes to someone who did
    not choose that app, so the name is treated as untrusted text: NFKC
    first (fullwidth and other compatibility forms of ':', '/', '@', '.'
    become the ASCII ones), then hidden, control and line-breaking
    characters and the link punctuation above become spaces. HTML escaping
    is the template's (autoescape).
    """
    plain = "".join(" " if hides_text(c) else c for c in unicodedata.normalize("NFKC", name))
    words = _LINK_PUNCTUATION.sub(" ", plain).split()
    return " ".join(words)[:MAX_APP_NAME_SHOWN].strip()


def requested_by(job: ClaimedJob, base_url: str) -> str:
    """The sentence that names who asked for this email (SPEC §14 "Whose account").

    An app's API call: that app, by name, whether or not the link opens its
    pages. Otherwise authsvc's own pages at `base_url`.
    """
    if job.app_id is None:
        return f"Requested on {base_url}."
    name = shown_app_name(str(job.payload.get("app_name") or ""))
    return f"Requested through the app “{name}”." if name else "Requested through an app."


class TemplateError(Exception):
    """The job cannot be rendered; retrying will not fix it."""


@lru_cache(maxsize=1024)
def _link_target(url: str) -> tuple[SplitResult, tuple[tuple[str, str], ...]]:
    # A handful of distinct targets (our pages, each app's redirect URLs):
    # split each once, not once per message.
    parts = urlsplit(url)
    query = tuple((k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
                  if k != "token")
    return parts, query


def with_token(url: str, token: str) -> str:
    """`url` with token=… added to its query, keeping what is already there."""
    parts, query = _link_target(url)
    return urlunsplit(parts._replace(query=urlencode((*query, ("token", token)))))


def message_domain(mail_from: str) -> str:
    """The domain of the sender address, used in every Message-ID."""
    address = parseaddr(mail_from)[1]
    return address.rpartition("@")[2] or "localhost"


def message_id_for(public_job_id: UUID, domain: str) -> str:
    """Stable per job, never per attempt: a re-send carries the same Message-ID."""
    return f"<authsvc-job-{public_job_id}@{domain}>"


Render = Callable[[Mapping[str, object]], str]


def compile_template(env: jinja2.Environment, name: str) -> Render:
    """The template as its static text split once around its `{{ name }}` holes.

    Our email templates are plain text with substitutions; joining the static
    parts with the (escaped, for HTML) values gives what Jinja renders, without
    running the template per message. A template using anything more (filters,
    blocks, conditions) is rendered by Jinja as usual.
    """
    source = env.loader.get_source(env, name)[0] if env.loader else ""
    tree = env.parse(source)
    parts: list[str | tuple[str]] = []
    simple = all(isinstance(node, nodes.Output) for node in tree.body)
    for output in tree.body if simple else ():
        for node in output.nodes:  # type: ignore[attr-defined]
            if isinstance(node, nodes.TemplateData):
                parts.append(node.data)
            elif isinstance(node, nodes.Name) and node.ctx == "load":
                parts.append((node.name,))
            else:
                simple = False
    if not simple:
        template = env.get_template(name)
        return lambda context: template.render(context)
    show: Callable[[object], str] = (lambda v: str(escape(v))) if env.autoescape else str

    def render(context: Mapping[str, object]) -> str:
        # A missing value raises KeyError, as StrictUndefined would raise.
        return "".join(p if isinstance(p, str) else show(context[p[0]]) for p in parts)

    return render


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
        self._compiled: dict[str, tuple[Render, Render]] = {}
        self._valid_for = {p: describe_duration(codec.ttl(p)) for p in {*LINK_PATHS, *CODE_PATHS}}

    def _templates(self, template: str) -> tuple[Render, Render]:
        """(text, html) renderers for `template`, compiled on first use."""
        compiled = self._compiled.get(template)
        if compiled is None:
            compiled = (compile_template(self._text, f"{template}.txt"),
                        compile_template(self._html, f"{template}.html"))
            self._compiled[template] = compiled  # a race only compiles twice
        return compiled

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
            "requested_by": requested_by(job, base),
        }
        for key, shown in MASKED.items():
            if key in job.payload:
                context[shown] = masked(str(job.payload[key]))
        if job.purpose is not None:
            assert job.user_id is not None and job.token_version is not None
            assert job.issued_at is not None
            claims = TokenClaims(job.user_id, job.purpose, job.token_version, job.issued_at)
            redirect_url = job.payload.get("redirect_url")
            expires_at = self.codec.expires_at(job.purpose, job.issued_at)
            context.update(
                expires_at=expires_at.strftime("%Y-%m-%d %H:%M UTC"),
                valid_for=self._valid_for[job.purpose],
            )
            if job.purpose in LINK_PATHS:
                target = redirect_url or base + LINK_PATHS[job.purpose]
                context.update(link=with_token(str(target), self.codec.mint(claims)))
            if job.purpose in CODE_PATHS:
                context.update(
                    # The same claims as the link, typed by hand on another device:
                    # on the app's own page (its redirect URL, with no token) when
                    # an app started the flow, else on ours.
                    code=self.codec.mint_code(claims),
                    code_url=str(redirect_url or base + CODE_PATHS[job.purpose]),
                )
        return context

    def parts(self, job: ClaimedJob) -> tuple[list[tuple[str, str]], str, str]:
        """The message's headers (in order, unfolded), text and HTML; TemplateError if it fails."""
        headers, text, html, _context = self._rendered(job)
        return headers, text, html

    def _rendered(
        self, job: ClaimedJob
    ) -> tuple[list[tuple[str, str]], str, str, dict[str, object]]:
        if not is_canonical(job.recipient):
            # Mail goes to exactly the stored address or nowhere: a row the
            # parser would not produce (written before it, or by hand) could
            # make the SMTP client deliver elsewhere.
            raise TemplateError("recipient is not one plain, canonical address; not sent")
        try:
            context = self._context(job)
            render_text, render_html = self._templates(job.template)
            text = render_text(context)
            html = render_html(context)
        except (jinja2.TemplateError, KeyError, AssertionError) as exc:
            raise TemplateError(f"{job.template}: {type(exc).__name__}: {exc}") from None
        headers = [
            ("From", self.settings.mail_from),
            ("To", job.recipient),
            ("Subject", SUBJECTS[job.template]),
            ("Date", format_datetime(self.clock())),
            ("Message-ID", message_id_for(job.public_id, self.domain)),
            ("X-Authsvc-Job", str(job.public_id)),
        ]
        if job.token_version is not None:
            headers.append(("X-Authsvc-Token-Version", str(job.token_version)))
        return headers, text, html, context

    def render(self, job: ClaimedJob) -> OutgoingEmail:
        """The complete message for `job`; TemplateError if it cannot be built."""
        headers, text, html, context = self._rendered(job)
        utf8 = needs_smtputf8(self.sender, job.recipient)
        try:
            data = build_message(headers, text, html, utf8=utf8)
        except UnicodeError as exc:
            raise TemplateError(f"{job.template}: cannot encode the message: {exc}") from None
        message_id = message_id_for(job.public_id, self.domain)
        # Same on every attempt (no Date): a provider compares a retried
        # request's body with the first one under the same idempotency key.
        extra = tuple((k, v) for k, v in headers if k.startswith("X-Authsvc-"))
        link, code = context.get("link"), context.get("code")
        return OutgoingEmail(job.id, job.public_id, self.sender, job.recipient, message_id, data,
                             from_header=self.settings.mail_from, subject=SUBJECTS[job.template],
                             text=text, html=html, headers=extra, kind=job.template,
                             link=str(link) if link is not None else None,
                             code=str(code) if code is not None else None)
