"""Links and codes already sent keep working: minting writes exactly what it always wrote."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest
from itsdangerous import URLSafeSerializer

from authsvc.accounts.tokens import PURPOSES, TokenClaims, TokenCodec

KEYS = ["new-key-0123456789abcdef0123456789", "old-key-0123456789abcdef0123456789"]
CODEC = TokenCodec(KEYS, {p: 3600 for p in PURPOSES})


@pytest.mark.parametrize(("claims", "token", "code"), [
    (TokenClaims(42, "reset", 3, datetime(2026, 12, 7, 9, tzinfo=UTC)),
     "WzQyLDMsMTc5NjYzNDAwMF0.b5KJMZA_7WPDcRq0V1DUjAQ89N8", "556802"),
    # A payload zlib shortens: itsdangerous' compressed form, with its leading '.'.
    (TokenClaims(100_000_000, "verify", 1, datetime.fromtimestamp(1_700_000_000, UTC)),
     ".eJyLNjSAAh1DHUNzGCcWADyaBNs.cB_if5hG1JbY0zcVXSf9asUymRI", "807412"),
])
def test_a_link_and_code_minted_before_are_minted_the_same_today(
    claims: TokenClaims, token: str, code: str
) -> None:
    assert CODEC.mint(claims) == token
    assert CODEC.mint_code(claims) == code
    assert CODEC.read(token, claims.purpose, check_expiry=False) == claims


def test_mint_writes_what_the_serializers_dumps_writes() -> None:
    rng = random.Random(7)
    ordered = list(reversed(KEYS))  # itsdangerous signs with the last key
    for _ in range(2_000):
        purpose = rng.choice(PURPOSES)
        user_id = rng.choice([1, 10**rng.randrange(10), rng.randrange(1, 10**9)])
        issued = rng.choice([1_700_000_000, rng.randrange(1_600_000_000, 2_000_000_000)])
        claims = TokenClaims(user_id, purpose, rng.randrange(1, 1000),
                             datetime.fromtimestamp(issued, UTC))
        serializer = URLSafeSerializer(ordered, salt=f"authsvc.{purpose}")
        assert CODEC.mint(claims) == serializer.dumps([user_id, claims.version, issued])


def test_a_branded_link_carries_its_app_and_the_same_code() -> None:
    from uuid import UUID

    from authsvc.accounts.tokens import TokenError
    app = UUID("0f8fad5b-d9cb-469f-a165-70867728950e")
    plain = TokenClaims(42, "reset", 3, datetime(2026, 12, 7, 9, tzinfo=UTC))
    branded = TokenClaims(42, "reset", 3, plain.issued_at, brand_app_id=app)
    token = CODEC.mint(branded)
    assert CODEC.read(token, "reset", check_expiry=False).brand_app_id == app
    assert CODEC.read(CODEC.mint(plain), "reset", check_expiry=False).brand_app_id is None
    # The code is the claims a person types: the brand is not part of it.
    assert CODEC.mint_code(branded) == CODEC.mint_code(plain) == "556802"
    # A signed payload whose fourth field is not an app id is no token.
    serializer = URLSafeSerializer(list(reversed(KEYS)), salt="authsvc.reset")
    for fourth in ("not-an-app", 7, "g" * 32):
        with pytest.raises(TokenError):
            CODEC.read(serializer.dumps([42, 3, 1796634000, fourth]), "reset", check_expiry=False)
