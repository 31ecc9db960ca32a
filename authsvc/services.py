"""The long-lived objects a process shares, built once and passed in."""

from __future__ import annotations

from dataclasses import dataclass

from psycopg_pool import ConnectionPool

from authsvc.accounts.passwords import Passwords
from authsvc.accounts.tokens import TokenCodec
from authsvc.clock import Clock, system_clock
from authsvc.config import Settings
from authsvc.operators import CONSOLE_CODE_TTL


@dataclass(frozen=True)
class Services:
    settings: Settings
    pool: ConnectionPool
    tokens: TokenCodec
    passwords: Passwords
    clock: Clock


def build_services(
    settings: Settings,
    pool: ConnectionPool,
    *,
    clock: Clock = system_clock,
    passwords: Passwords | None = None,
) -> Services:
    return Services(settings, pool, token_codec(settings, clock), passwords or Passwords(), clock)


def token_codec(settings: Settings, clock: Clock = system_clock) -> TokenCodec:
    """The one way a process builds its codec: the web app here, the worker (cli/worker.py) too."""
    return TokenCodec(
        settings.secret_keys,
        {
            "reset": settings.reset_ttl,
            "verify": settings.verify_ttl,
            "email_change": settings.email_change_ttl,
            "email_change_approval": settings.email_change_ttl,
            "email_revert": settings.email_revert_ttl,
            "account_delete": settings.delete_ttl,
            "sign_in": settings.sign_in_ttl,
            "console_login": CONSOLE_CODE_TTL,
        },
        clock,
    )
