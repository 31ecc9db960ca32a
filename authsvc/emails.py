"""Email address normalisation and validation, shared by API and pages."""

from __future__ import annotations

import re

MAX_EMAIL_LENGTH = 254
# Deliberately loose: the verification email is the real test of an address.
_SHAPE = re.compile(r"^[^@\s]{1,64}@[^@\s.]+(\.[^@\s.]+)+$")


class InvalidEmail(ValueError):
    pass


def normalise_email(value: object) -> str:
    """Trimmed, lower-cased address, or InvalidEmail with a reason."""
    if not isinstance(value, str):
        raise InvalidEmail("must be a string")
    email = value.strip().lower()
    if not email:
        raise InvalidEmail("is required")
    if len(email) > MAX_EMAIL_LENGTH:
        raise InvalidEmail(f"is longer than {MAX_EMAIL_LENGTH} characters")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in email):
        raise InvalidEmail("contains control characters")
    if not _SHAPE.match(email):
        raise InvalidEmail("is not an email address")
    return email
