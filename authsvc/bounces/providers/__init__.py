"""How each mail provider's bounce and complaint notifications are verified and read.

One module per provider, each a `NoticeReader` (authsvc/bounces/notices.py);
`readers_for` builds the ones whose verification is configured, which are
the only ones POST /webhooks/provider/NAME answers for.
"""

from __future__ import annotations

from authsvc.bounces.notices import NoticeReader
from authsvc.bounces.providers.brevo import BrevoReader
from authsvc.bounces.providers.mailgun import MailgunReader
from authsvc.bounces.providers.postmark import PostmarkReader
from authsvc.bounces.providers.resend import ResendReader
from authsvc.bounces.providers.sendgrid import SendgridReader
from authsvc.bounces.providers.ses import SesReader
from authsvc.config import ProviderWebhooks


def readers_for(settings: ProviderWebhooks) -> dict[str, NoticeReader]:
    readers: list[NoticeReader] = []
    if settings.resend_secret:
        readers.append(ResendReader(settings.resend_secret))
    if settings.postmark_auth:
        readers.append(PostmarkReader(settings.postmark_auth))
    if settings.ses_topic_arns:
        readers.append(SesReader(settings.ses_topic_arns))
    if settings.sendgrid_public_key:
        readers.append(SendgridReader(settings.sendgrid_public_key))
    if settings.mailgun_signing_key:
        readers.append(MailgunReader(settings.mailgun_signing_key))
    if settings.brevo_auth:
        readers.append(BrevoReader(settings.brevo_auth))
    return {reader.name: reader for reader in readers}
