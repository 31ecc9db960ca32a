"""argon2id hashing and the password policy (NIST 800-63B style)."""

from __future__ import annotations

from functools import cache

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from authsvc.resources import data_file

MIN_LENGTH = 8
MAX_LENGTH = 256

# OWASP's floor for argon2id: m=19 MiB, t=2, p=1.
TIME_COST = 2
MEMORY_COST_KIB = 19 * 1024
PARALLELISM = 1


class WeakPassword(Exception):
    """The password breaks the policy; the message says how, for the person."""


@cache
def _common_passwords() -> frozenset[str]:
    path = data_file("common-passwords.txt")
    return frozenset(
        line.strip().lower() for line in path.read_text("utf-8").splitlines() if line.strip()
    )


def check_policy(password: object, email: str | None = None) -> str:
    """Return the password if acceptable, else raise WeakPassword."""
    if not isinstance(password, str):
        raise WeakPassword("The password must be text.")
    if len(password) < MIN_LENGTH:
        raise WeakPassword(f"Use at least {MIN_LENGTH} characters.")
    if len(password) > MAX_LENGTH:
        raise WeakPassword(f"Use at most {MAX_LENGTH} characters.")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in password):
        raise WeakPassword("The password cannot contain control characters.")
    if password.lower() in _common_passwords():
        raise WeakPassword("This password is too common; choose another.")
    if email and password.strip().lower() == email.lower():
        raise WeakPassword("The password cannot be your email address.")
    return password


class Passwords:
    """Hash and verify with argon2id; parameters are injectable (cheap in tests)."""

    def __init__(self, hasher: PasswordHasher | None = None) -> None:
        self._hasher = hasher or PasswordHasher(
            time_cost=TIME_COST, memory_cost=MEMORY_COST_KIB, parallelism=PARALLELISM
        )
        # Verified against when the email is unknown, so both paths cost the same.
        self._dummy_hash = self._hasher.hash("authsvc-timing-equaliser")

    def hash(self, password: str) -> str:
        return self._hasher.hash(password)

    def verify(self, password_hash: str | None, password: str) -> bool:
        try:
            return self._hasher.verify(password_hash or self._dummy_hash, password) and bool(
                password_hash
            )
        except (VerificationError, InvalidHashError):
            return False

    def needs_rehash(self, password_hash: str) -> bool:
        return self._hasher.check_needs_rehash(password_hash)


def cheap_passwords() -> Passwords:
    """Fast parameters for tests only."""
    return Passwords(PasswordHasher(time_cost=1, memory_cost=8, parallelism=1))
