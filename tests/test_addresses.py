"""The worker's canonical-address check: its shortcut never accepts what the parser would not.

Mail goes to exactly the stored address or nowhere (authsvc/worker/render.py), so
`is_canonical` must agree with parse_address on every input; the shortcut
for plain addresses may only ever say yes where the parser says the address
is its own canonical form.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from authsvc.accounts.addresses import (
    PLAIN_ADDRESS,
    InvalidAddress,
    _is_plain_canonical,
    is_canonical,
    parse_address,
)


def _parser_says_canonical(address: str) -> bool:
    try:
        return parse_address(address) == address
    except InvalidAddress:
        return False


@settings(max_examples=300, deadline=None)
@given(st.from_regex(PLAIN_ADDRESS, fullmatch=True))
def test_every_address_the_shortcut_takes_is_its_own_canonical_form(address):
    if _is_plain_canonical(address):
        assert parse_address(address) == address


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("aZ0.-_%!+@xn-é\u200b "), max_size=30))
def test_is_canonical_answers_as_the_parser_does_for_any_text(text):
    assert is_canonical(text) == _parser_says_canonical(text)


@pytest.mark.parametrize("address", [
    "Alice@example.com",            # upper case: the canonical form is lower
    "a%evil.test@corp.example",     # a source route
    "a!b@corp.example",
    "x@xn--bcher-kva.example",      # Punycode decodes to bücher
    "x@ab--cd.example",             # reserved hyphens
    "x@localhost",
    "x@printer.local",
    "x@mail.invalid",
    "x@1.2.3.4",                    # no letter at the end
    "x@example.123",
    "x" * 65 + "@example.com",      # local part over 64
    "x@" + "a" * 63 + "." + "b" * 63 + "." + "c" * 63 + "." + "d" * 61 + ".com",  # over 254
    "a..b@example.com",
    ".a@example.com",
    "a@-example.com",
    "a@example-.com",
    "a@example.com.",
    " a@example.com",
    "a@example.com\n",
    "a@example.com\r\n",
    "x" * 64 + "@" + "a" * 63 + "." + "b" * 63 + "." + "c" * 58 + ".com",  # 255 characters
    "x@" + "a" * 64 + ".com",  # a label over 63
])
def test_addresses_the_shortcut_leaves_to_the_parser(address):
    assert not _is_plain_canonical(address)
    assert is_canonical(address) == _parser_says_canonical(address)


@pytest.mark.parametrize("address", [
    "alice@example.com", "a.b+tag@mail.example.co.uk", "x@inbox.test", "o'neil@example.org",
    "under_score@x-y.example", "a@b.c0d",
    "x" * 64 + "@" + "a" * 63 + "." + "b" * 63 + "." + "c" * 57 + ".com",  # 254, the most
])
def test_plain_addresses_take_the_shortcut(address):
    assert _is_plain_canonical(address) and _parser_says_canonical(address)
