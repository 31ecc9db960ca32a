"""Scope names: which test-inbox scope a recipient address lands in (SPEC §8)."""

from __future__ import annotations

import re
import secrets
import unicodedata

MAX_SCOPE_LENGTH = 64
# Unicode word characters, dots and dashes, and combining marks after them:
# enough for tags such as `run-42.a` and for SMTPUTF8 local parts (`"İ".lower()`
# is `i` + U+0307), while keeping scopes safe in URL paths.
_CHARACTER = re.compile(r"[\w.-]")
_QUOTED_PAIR = re.compile(r"\\(.)")


class BadScope(ValueError):
    """Not a usable scope name; the message says why."""


def _is_mark(character: str) -> bool:
    return unicodedata.category(character).startswith("M")


def normalise_scope(value: str) -> str:
    """The lower-case (NFC) scope name, or BadScope."""
    scope = unicodedata.normalize("NFC", value.strip().lower())
    valid = (
        1 <= len(scope) <= MAX_SCOPE_LENGTH
        and not _is_mark(scope[0])
        and all(_CHARACTER.fullmatch(c) or _is_mark(c) for c in scope)
    )
    if not valid:
        raise BadScope(
            f"scope names are 1-{MAX_SCOPE_LENGTH} letters, digits, '.', '-' or '_', got {value!r}"
        )
    return scope


def scope_of(address: str, domain: str) -> str | None:
    """The scope of `address`, None for another domain; BadScope for an unusable local part.

    `alice+run42@inbox.test` and `run42@inbox.test` both land in `run42`; a
    quoted local part is read unquoted (`"a b+run42"@inbox.test` lands in `run42`).
    """
    local, at, address_domain = address.strip().rpartition("@")
    if not at or address_domain.lower() != domain.lower():
        return None
    if len(local) >= 2 and local.startswith('"') and local.endswith('"'):
        local = _QUOTED_PAIR.sub(r"\1", local[1:-1])
    tag = local.rpartition("+")[2]
    return normalise_scope(tag)


def new_scope_name() -> str:
    """A fresh, unguessable scope (128 random bits)."""
    return secrets.token_hex(16)
