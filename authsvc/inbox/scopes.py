"""Scope names: which test-inbox scope a recipient address lands in (SPEC §8)."""

from __future__ import annotations

import re
import secrets

MAX_SCOPE_LENGTH = 64
# Unicode word characters, dots and dashes: enough for tags such as `run-42.a`
# and for SMTPUTF8 local parts, while keeping scopes safe in URL paths.
_SCOPE = re.compile(rf"[\w.-]{{1,{MAX_SCOPE_LENGTH}}}")


class BadScope(ValueError):
    """Not a usable scope name; the message says why."""


def normalise_scope(value: str) -> str:
    """The lower-case scope name, or BadScope."""
    scope = value.strip().lower()
    if not _SCOPE.fullmatch(scope):
        raise BadScope(
            f"scope names are 1-{MAX_SCOPE_LENGTH} letters, digits, '.', '-' or '_', got {value!r}"
        )
    return scope


def scope_of(address: str, domain: str) -> str | None:
    """The scope of `address`, None for another domain; BadScope for an unusable local part.

    `alice+run42@inbox.test` and `run42@inbox.test` both land in `run42`.
    """
    local, at, address_domain = address.strip().rpartition("@")
    if not at or address_domain.lower() != domain.lower():
        return None
    tag = local.rpartition("+")[2]
    return normalise_scope(tag)


def new_scope_name() -> str:
    """A fresh, unguessable scope (128 random bits)."""
    return secrets.token_hex(16)
