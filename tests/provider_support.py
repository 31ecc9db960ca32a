"""The HTTP providers and their local fakes, side by side, for tests that cover them all."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from authsvc.config import parse_http_provider_url
from authsvc.worker.providers import HTTP_PROVIDERS
from authsvc.worker.providers.http import HttpProviderMailer
from tools.local_brevo import LocalBrevo
from tools.local_mailgun import LocalMailgun
from tools.local_postmark import LocalPostmark
from tools.local_provider import LocalProvider
from tools.local_resend import LocalResend
from tools.local_sendgrid import LocalSendgrid
from tools.local_ses import LocalSes

FAKES: dict[str, Callable[..., LocalProvider]] = {
    fake.name: fake
    for fake in (LocalResend, LocalPostmark, LocalSes, LocalSendgrid, LocalMailgun, LocalBrevo)
}
IDEMPOTENT = ("resend", "brevo")
KEYLESS = tuple(name for name in FAKES if name not in IDEMPOTENT)


@dataclass
class Case:
    """One provider under test: its running fake and a mailer pointed at it."""

    name: str
    fake: LocalProvider

    def mailer(self, timeout: float = 2.0, url: str | None = None) -> HttpProviderMailer:
        target = parse_http_provider_url(url or self.fake.mail_url)
        return HTTP_PROVIDERS[self.name](target, timeout=timeout)


@contextmanager
def running_fake(name: str, **options: object) -> Iterator[Case]:
    with FAKES[name](**options) as fake:
        yield Case(name, fake)


every_provider = pytest.mark.parametrize("name", list(FAKES))
