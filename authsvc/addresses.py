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

import unicodedata

from email_validator import EmailNotValidError, validate_email

from authsvc.hidden_characters import has_blank_looking

MAX_ADDRESS_LENGTH = 254


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


def is_canonical(address: str) -> bool:
    """Whether `address` is exactly what parse_address makes of it (the worker's check)."""
    try:
        return parse_address(address) == address
    except InvalidAddress:
        return False
