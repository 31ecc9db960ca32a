"""How each mail provider's bounce and complaint notifications are verified and read.

One module per provider, each a `ProviderReader` (authsvc/bounces/schemes.py);
`readers_for` builds the ones whose verification is configured, which are
the only ones POST /webhooks/provider/NAME answers for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from authsvc.bounces.notices import NoticeReader
from authsvc.bounces.providers.brevo import BrevoReader
from authsvc.bounces.providers.mailgun import MailgunReader
from authsvc.bounces.providers.postmark import PostmarkReader
from authsvc.bounces.providers.resend import ResendReader
from authsvc.bounces.providers.sendgrid import SendgridReader
from authsvc.bounces.providers.ses import SesReader
from authsvc.config import ProviderWebhooks


def readers_for(settings: ProviderWebhooks) -> dict[str, NoticeReader]:
    """A reader for each provider whose setting is given, by its name."""
    configured: list[tuple[Any, Callable[[Any], NoticeReader]]] = [
        (settings.resend_secret, ResendReader),
        (settings.postmark_auth, PostmarkReader),
        (settings.ses_topic_arns, SesReader),
        (settings.sendgrid_public_key, SendgridReader),
        (settings.mailgun_signing_key, MailgunReader),
        (settings.brevo_auth, BrevoReader),
    ]
    readers = [make(setting) for setting, make in configured if setting]
    return {reader.name: reader for reader in readers}
