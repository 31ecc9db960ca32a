"""The one email-address parser: API, pages, CLI and worker all call `parse_address`.

An address is a plain addr-spec, nothing more: no display name, no angle
brackets, no comments, no quoted local part, no IP literal, and no control,
bidi, zero-width or other invisible characters. Anything looser lets the
stored address differ from where mail goes (`a+x<thief@x.test>` mails the
thief) or lets one mailbox hold many accounts (`alice(1)@…`, NFC vs NFD).
email-validator does the RFC and IDNA work; this module adds the house rules
(trim, NFC, lower-case) so every entry point agrees on one canonical form.
"""

from __future__ import annotations

import re
import unicodedata

from email_validator import SPECIAL_USE_DOMAIN_NAMES, EmailNotValidError, validate_email

from authsvc.accounts.hidden_characters import has_blank_looking, hides_text

MAX_ADDRESS_LENGTH = 254
MAX_LOCAL_PART_LENGTH = 64  # RFC 5321; email-validator's strict mode enforces it


class InvalidAddress(ValueError):
    """Not one plain address; `str(exc)` is a sentence a person can act on."""


def parse_address(value: object) -> str:
    """The canonical form of one plain address, or InvalidAddress.

    Trimmed, Unicode NFC, the domain lower-cased and IDNA-checked (an
    A-label and its U-label give the same result), the local part
    lower-cased so that addresses compare case-insensitively.
    """
    if not isinstance(value, str):
        raise InvalidAddress("The email address must be a string.")
    # ASCII whitespace only: str.strip() would also eat NBSP, U+001C and
    # friends, quietly accepting invisible characters the rule refuses.
    text = value.strip(" \t\r\n")
    if not text:
        raise InvalidAddress("Enter an email address.")
    if len(text) > MAX_ADDRESS_LENGTH:
        raise InvalidAddress(f"The email address is longer than {MAX_ADDRESS_LENGTH} characters.")
    # email-validator refuses control and format characters itself.
    if has_blank_looking(text):
        raise InvalidAddress("The email address contains an invisible character.")
    try:
        parsed = validate_email(
            text,
            check_deliverability=False,  # the emailed link is the real test
            test_environment=True,  # the test inbox's domain is *.test
            allow_smtputf8=True,
            allow_display_name=False,
            allow_quoted_local=False,
            allow_domain_literal=False,
            allow_empty_local=False,
            strict=True,  # RFC length limits too (64 before the @-sign)
        )
    except EmailNotValidError as exc:
        raise InvalidAddress(str(exc)) from None
    if "%" in parsed.local_part or "!" in parsed.local_part:
        # Old source routes: a server that honours them relays "a%evil.test@corp"
        # to evil.test, so the stored address would not be where mail goes.
        raise InvalidAddress("The email address may not contain % or !.")
    local = unicodedata.normalize("NFC", parsed.local_part.lower())
    address = f"{local}@{parsed.domain}"
    if len(address) > MAX_ADDRESS_LENGTH:
        raise InvalidAddress(f"The email address is longer than {MAX_ADDRESS_LENGTH} characters.")
    return address


# The shape of nearly every stored address: ASCII, lower-case, a dot-atom
# local part without % or !, LDH domain labels and a last label ending in a
# letter. Such an address is already what parse_address makes of it, except
# in the cases _is_plain_canonical checks apart; anything else takes the full
# parser. tests/test_addresses.py holds the shortcut to parse_address.
_ATOM = r"[a-z0-9_#$&'*+\-/=?^`{|}~]+"
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_LAST_LABEL = r"(?:[a-z]|[a-z0-9][a-z0-9-]{0,61}[a-z])"
PLAIN_ADDRESS = re.compile(rf"{_ATOM}(?:\.{_ATOM})*@(?:{_LABEL}\.)+{_LAST_LABEL}")
# RFC 5890: a label with "--" in its third and fourth places is Punycode
# (xn--, which decodes to another form) or reserved.
_HYPHENS_AT_3 = re.compile(r"(?:^|\.)..--")
_RESERVED_DOMAINS = tuple(d for d in SPECIAL_USE_DOMAIN_NAMES if d != "test")


def _is_plain_canonical(address: str) -> bool:
    """True only for addresses parse_address returns unchanged (a shortcut, never wider)."""
    if len(address) > MAX_ADDRESS_LENGTH or not PLAIN_ADDRESS.fullmatch(address):
        return False
    local, _, domain = address.rpartition("@")
    return (
        len(local) <= MAX_LOCAL_PART_LENGTH
        and not _HYPHENS_AT_3.search(domain)
        and not any(domain == d or domain.endswith("." + d) for d in _RESERVED_DOMAINS)
    )


def is_canonical(address: str) -> bool:
    """Whether `address` is exactly what parse_address makes of it (the worker's check).

    The worker asks this of every message it sends; the full parser costs
    about 45 µs an address, the plain-shape shortcut a few.
    """
    if _is_plain_canonical(address):
        return True
    try:
        return parse_address(address) == address
    except InvalidAddress:
        return False


def masked(address: str) -> str:
    """The address as a notice to another mailbox may show it: n•••@example.com.

    Enough for its owner to recognise, too little for anyone else to write
    to; the domain stays whole (where the account went is the point).
    """
    local, _, domain = address.rpartition("@")
    return f"{local[:1]}\u2022\u2022\u2022@{domain}"


MAX_DISPLAY_NAME = 64


def parse_mailbox(value: object) -> str:
    """A sender as `Name <address>` (or a bare address), the address through parse_address.

    For an app's From line (`authsvc apps update --mail-from`): the name is
    plain words (no quotes, angle brackets, hidden or control characters), so
    the header cannot carry a second address or reorder what a reader sees.
    Returned as `Name <address>`, or the address alone.
    """
    if not isinstance(value, str) or not value.strip():
        raise InvalidAddress("expected 'Name <address>' or an address")
    name, bracket, rest = value.strip().rpartition("<")
    if not bracket:
        return parse_address(value)
    if not rest.endswith(">"):
        raise InvalidAddress("expected 'Name <address>': the address ends with '>'")
    address = parse_address(rest[:-1])
    name = " ".join(name.split())
    plain = not any(c in name for c in '"<>@,;:\\') and not hides_text(name.replace(" ", ""))
    if len(name) > MAX_DISPLAY_NAME or not plain:
        raise InvalidAddress(f"the name must be at most {MAX_DISPLAY_NAME} plain characters,"
                             " without quotes, brackets, '@', ',', ';' or ':'")
    return f"{name} <{address}>" if name else address
