"""Mail transports by AUTHSVC_MAIL_URL: SMTP, an HTTP provider, or the discarding null mailer.

Each sender thread gets its own mailer from `mailer_factory` (one SMTP
connection or one pooled HTTP client each, reused across jobs). An HTTP
provider is one module here: a subclass of `HttpProviderMailer` saying how to
build its request and read its answer (docs/worker.md, "Adding a provider").
"""

from __future__ import annotations

from collections.abc import Callable

from authsvc.config import Settings, SmtpTarget
from authsvc.worker.mailers import Mailer, NullMailer, SmtpMailer
from authsvc.worker.providers.brevo import BrevoMailer
from authsvc.worker.providers.http import HttpProviderMailer
from authsvc.worker.providers.mailgun import MailgunMailer
from authsvc.worker.providers.postmark import PostmarkMailer
from authsvc.worker.providers.resend import ResendMailer
from authsvc.worker.providers.sendgrid import SendgridMailer
from authsvc.worker.providers.ses import SesMailer

# Where `authsvc dev` runs the test inbox; used when no mail URL is set
# outside production (production refuses to start without one).
DEV_SMTP = SmtpTarget(host="127.0.0.1", port=2525, security="plain")
HTTP_PROVIDERS: dict[str, type[HttpProviderMailer]] = {
    mailer.name: mailer
    for mailer in (ResendMailer, PostmarkMailer, SesMailer, SendgridMailer, MailgunMailer,
                   BrevoMailer)
}


def mailer_factory(settings: Settings) -> Callable[[float], Mailer]:
    """One mailer per sender thread, given the send timeout (well inside the lease)."""
    if settings.null_mail:
        return lambda _timeout: NullMailer()
    provider = settings.http_provider
    if provider is not None:
        mailer_class = HTTP_PROVIDERS[provider.provider]
        return lambda timeout: mailer_class(provider, timeout=timeout)
    target = settings.smtp or DEV_SMTP
    return lambda timeout: SmtpMailer(target, timeout=timeout)
