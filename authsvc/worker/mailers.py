"""The Mailer protocol, its failure classes, and the SMTP implementation.

Every failure is raised as one of three classes, because each has its own
remedy: transient (retry later, no sooner than `retry_after` when the
provider said so), permanent (give up, keep the reason) and ambiguous (the
server may have accepted the message; see docs/worker.md). HTTP providers
(authsvc/worker/providers/) implement the same protocol: a provider that
takes an idempotency key gets one derived from `email.idempotency_key`
(Resend that string, Brevo a UUIDv5 of it), and each returns the
provider's message id.
"""

from __future__ import annotations

import re
import smtplib
import ssl
import time
from dataclasses import dataclass
from typing import Protocol
from uuid import UUID

from authsvc.config import SmtpTarget

# Servers and providers drop idle connections: one left idle this long is
# closed by its sender (authsvc/worker/loop.py) and never reused (here, and the HTTP
# providers' keep-alive expiry), so no send starts on a half-dead connection.
MAILER_IDLE_SECONDS = 10.0


class SendError(Exception):
    """A delivery that did not (certainly) succeed; `reason` is kept on the job."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TransientSendError(SendError):
    """Nothing was accepted (or a retry is safe); the same message may succeed later."""

    def __init__(self, reason: str, *, retry_after: float | None = None,
                 retry_within: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after  # seconds the provider asked us to wait, if it did
        # Seconds within which the retry must come to stay safe (a provider's
        # idempotency key that expires sooner than our backoff), if any.
        self.retry_within = retry_within


class PermanentSendError(SendError):
    """The provider refused this message; retrying will not help."""


class _StaleConnection(Exception):
    """The server closed the connection before our first command on it."""


class AmbiguousSendError(SendError):
    """The connection broke after the message was handed over: it may have been delivered."""


def needs_smtputf8(*addresses: str) -> bool:
    """A non-ASCII address travels only with SMTPUTF8 (RFC 6531), in the envelope and headers."""
    return not all(address.isascii() for address in addresses)


@dataclass(frozen=True)
class OutgoingEmail:
    job_id: int  # internal, for logs and the trail
    public_job_id: UUID  # what the message and the provider see (Message-ID, idempotency key)
    sender: str  # bare address, for the envelope
    recipient: str
    message_id: str
    data: bytes  # the whole RFC 5322 (or RFC 6532, for UTF-8 addresses) message, CRLF endings
    # The parts an HTTP provider takes as JSON fields instead of a MIME message.
    from_header: str = ""  # display form, e.g. 'authsvc <no-reply@example.com>'
    subject: str = ""
    text: str = ""
    html: str = ""
    headers: tuple[tuple[str, str], ...] = ()  # extra headers, e.g. X-Authsvc-Job
    # What an app that delivers its own mail also gets (authsvc/worker/hook_delivery.py).
    kind: str = ""  # the template: verify, reset, ...
    link: str | None = None  # the minted link and its code, for emails that carry them
    code: str | None = None
    locale: str = "en"  # what Content-Language says (SPEC §14)

    @property
    def needs_smtputf8(self) -> bool:
        return needs_smtputf8(self.sender, self.recipient)

    @property
    def idempotency_key(self) -> str:
        """Derived from the job, never the attempt, so every retry carries the same key."""
        return f"authsvc-job-{self.public_job_id}"


class Mailer(Protocol):
    def send(self, email: OutgoingEmail) -> str:
        """Deliver one message; return the provider's message id or raise SendError."""
        ...

    def close(self) -> None:
        """Drop any open connection."""
        ...


class NullMailer:
    """AUTHSVC_MAIL_URL=null://: accepts every built message and discards it (load tests).

    Like Django's dummy backend; the message is still rendered and built, so a
    load test measures everything but the network. Refused in production.
    """

    def __init__(self) -> None:
        self.discarded = 0

    def send(self, email: OutgoingEmail) -> str:
        self.discarded += 1
        return email.message_id

    def close(self) -> None:
        pass


_LEADING_DOT = re.compile(rb"(?m)^\.")


def _dot_stuffed(data: bytes) -> bytes:
    body = _LEADING_DOT.sub(b"..", data)
    if not body.endswith(b"\r\n"):
        body += b"\r\n"
    return body + b".\r\n"


def _reply_text(code: int, message: bytes | str) -> str:
    text = message.decode("utf-8", "replace") if isinstance(message, bytes) else message
    return f"{code} {text}".strip()


class SmtpMailer:
    """One SMTP connection, reused across messages; not shared between threads."""

    def __init__(
        self, target: SmtpTarget, *, timeout: float, local_hostname: str | None = None
    ) -> None:
        self.target = target
        self.timeout = timeout
        self.local_hostname = local_hostname
        self._smtp: smtplib.SMTP | None = None
        self._last_used = 0.0

    def _connect(self) -> smtplib.SMTP:
        target = self.target
        try:
            smtp: smtplib.SMTP
            if target.security == "ssl":
                smtp = smtplib.SMTP_SSL(
                    target.host, target.port, local_hostname=self.local_hostname,
                    timeout=self.timeout, context=ssl.create_default_context(),
                )
            else:
                smtp = smtplib.SMTP(
                    target.host, target.port,
                    local_hostname=self.local_hostname, timeout=self.timeout,
                )
            smtp.ehlo()
            if target.security == "starttls":
                smtp.starttls(context=ssl.create_default_context())
                smtp.ehlo()
            if target.username:
                smtp.login(target.username, target.password or "")
        except smtplib.SMTPResponseException as exc:
            # A refused greeting, TLS or login is the server's or the
            # operator's problem, not the message's: keep it and retry later.
            reply = _reply_text(exc.smtp_code, exc.smtp_error)
            raise TransientSendError(f"connect: {reply}") from None
        except (OSError, smtplib.SMTPException) as exc:
            raise TransientSendError(f"connect: {type(exc).__name__}: {exc}") from None
        return smtp

    def greet(self) -> None:
        """Connect, greet, TLS and log in as configured, then leave: nothing is sent
        (`authsvc check`). TransientSendError says what failed."""
        smtp = self._connect()
        try:
            smtp.quit()
        except (OSError, smtplib.SMTPException):
            smtp.close()  # greeted already; a server that hangs up first is no failure

    def _session(self) -> tuple[smtplib.SMTP, bool]:
        """The open connection (reused=True) or a new one."""
        if self._smtp is not None and time.monotonic() - self._last_used > MAILER_IDLE_SECONDS:
            self.close()
        if self._smtp is not None:
            return self._smtp, True
        self._smtp = self._connect()
        return self._smtp, False

    def send(self, email: OutgoingEmail) -> str:
        try:
            return self._send_reconnecting(email)
        except SendError as exc:
            if isinstance(exc, PermanentSendError) and self._smtp is not None:
                self._reset()
            else:
                self.close()
            raise
        finally:
            self._last_used = time.monotonic()

    def _send_reconnecting(self, email: OutgoingEmail) -> str:
        smtp, reused = self._session()
        try:
            return self._send(smtp, email)
        except _StaleConnection:
            if not reused:
                raise TransientSendError("MAIL: server closed the connection") from None
        # The server dropped our idle connection: not the message's fault, so
        # once more on a fresh one rather than a retry minutes later.
        self.close()
        smtp, _ = self._session()
        try:
            return self._send(smtp, email)
        except _StaleConnection:
            raise TransientSendError("MAIL: server closed the connection") from None

    @staticmethod
    def _mail_options(smtp: smtplib.SMTP, email: OutgoingEmail) -> list[str]:
        """SMTPUTF8 (and 8BITMIME) for a non-ASCII address; a permanent failure without it."""
        if not email.needs_smtputf8:
            # smtplib leaves a connection in UTF-8 after an SMTPUTF8 transaction.
            smtp.command_encoding = "ascii"
            return []
        if not smtp.has_extn("smtputf8"):
            which = "sender" if email.recipient.isascii() else "recipient"
            raise PermanentSendError(f"{which} needs SMTPUTF8, which the server does not offer")
        # smtp.mail() switches the commands of this transaction to UTF-8.
        return ["SMTPUTF8", *(["BODY=8BITMIME"] if smtp.has_extn("8bitmime") else [])]

    def _send(self, smtp: smtplib.SMTP, email: OutgoingEmail) -> str:
        if smtplib.quoteaddr(email.recipient) != f"<{email.recipient}>":
            # smtplib re-parses the address for RCPT TO; if that would pick
            # out another mailbox (`a<b@x>` becomes b@x), send nothing.
            raise PermanentSendError("RCPT: the envelope would differ from the stored recipient")
        options = self._mail_options(smtp, email)
        stage = "MAIL"
        try:
            try:
                code, reply = smtp.mail(email.sender, options)
            except smtplib.SMTPServerDisconnected:
                raise _StaleConnection() from None
            self._check(stage, code, reply)
            stage = "RCPT"
            code, reply = smtp.rcpt(email.recipient)
            self._check(stage, code, reply)
            stage = "DATA"
            code, reply = smtp.docmd("DATA")
            if code != 354:
                self._check(stage, code, reply)
                raise TransientSendError(f"DATA: unexpected {_reply_text(code, reply)}")
            smtp.send(_dot_stuffed(email.data))
            # From here on the server holds the whole message: a broken
            # connection no longer means "not delivered".
            stage = "after final dot"
            code, reply = smtp.getreply()
        except smtplib.SMTPServerDisconnected as exc:
            error_class = AmbiguousSendError if stage == "after final dot" else TransientSendError
            raise error_class(f"{stage}: disconnected: {exc}") from None
        except OSError as exc:  # timeouts and resets
            error_class = AmbiguousSendError if stage == "after final dot" else TransientSendError
            raise error_class(f"{stage}: {type(exc).__name__}: {exc}") from None
        except UnicodeError as exc:
            # smtplib encodes each command before writing it, so nothing of it
            # was sent: this message cannot go over this connection, ever.
            reason = f"{stage}: cannot encode for this server: {type(exc).__name__}: {exc}"
            raise PermanentSendError(reason) from None
        self._check("end of DATA", code, reply)
        return email.message_id

    @staticmethod
    def _check(stage: str, code: int, reply: bytes) -> None:
        if 200 <= code < 300:
            return
        text = f"{stage}: {_reply_text(code, reply)}"
        if 500 <= code < 600:
            raise PermanentSendError(text)
        raise TransientSendError(text)

    def _reset(self) -> None:
        try:
            assert self._smtp is not None
            self._smtp.rset()
        except (OSError, smtplib.SMTPException):
            self.close()

    def close(self) -> None:
        smtp, self._smtp = self._smtp, None
        if smtp is None:
            return
        try:
            smtp.quit()
        except (OSError, smtplib.SMTPException):
            smtp.close()
