"""The long-lived objects a process shares, built once and passed in."""

from __future__ import annotations

from dataclasses import dataclass

from psycopg_pool import ConnectionPool

from authsvc.clock import Clock, system_clock
from authsvc.config import Settings
from authsvc.passwords import Passwords
from authsvc.tokens import TokenCodec


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
    tokens = TokenCodec(
        settings.secret_keys,
        {"reset": settings.reset_ttl, "verify": settings.verify_ttl},
        clock,
    )
    return Services(settings, pool, tokens, passwords or Passwords(), clock)
