"""Brands on the pages a link opens (SPEC §14): from the signed token only, checked, inert.

The attacker's side first: a query parameter, a forged or foreign token, a
revoked app, a name built to inject markup or reorder the page, a logo or a
colour that would widen the CSP. Then what a real brand looks like.
"""

from __future__ import annotations

import re
from dataclasses import replace
from uuid import UUID

import pytest

from authsvc.accounts import actions, deletion, email_change
from authsvc.accounts.tokens import TokenCodec
from authsvc.apps.brands import Brand
from authsvc.apps.keys import register_app
from authsvc.web.pages.branding import page_brand_of
from authsvc.web.plumbing import CONTENT_SECURITY_POLICY
from tests.link_support import latest_claims
from tests.pages_support import PASSWORD, make_account, text_of

ANN = "ann@example.com"
LOGO = "https://cdn.shop.example/logo.png"


def _brand(conn, app_id: UUID, **columns: str | None) -> None:
    fields = {"product_name": "Shop", "logo_url": None, "brand_color": None,
              "support_url": None, "default_locale": None, **columns}
    conn.execute(
        "UPDATE apps SET product_name = %(product_name)s, logo_url = %(logo_url)s,"
        " brand_color = %(brand_color)s, support_url = %(support_url)s,"
        " default_locale = %(default_locale)s WHERE id = %(id)s",
        {**fields, "id": app_id},
    )


@pytest.fixture
def shop(conn) -> UUID:
    app, _key = register_app(conn, "shop", ["https://shop.example/welcome"])
    _brand(conn, app.id, logo_url=LOGO, brand_color="#aa3300",
           support_url="https://shop.example/help")
    return app.id


@pytest.fixture
def verify_claims(conn, svc):
    make_account(conn, svc, ANN, verified=False)
    return latest_claims(conn, ANN, "verify")


def _verify_page(client, svc, claims, brand_app_id: UUID | None, query: str = ""):
    token = svc.tokens.mint(replace(claims, brand_app_id=brand_app_id))
    return client.get(f"/verify?token={token}{query}")


def _header(response) -> str:
    html = response.get_data(as_text=True)
    match = re.search(r'<a class="brand"[^>]*>(.*?)</a>', html, re.S)
    assert match, "no brand in the header"
    return match.group(1)


# --- what an attacker can try ------------------------------------------------------


def test_a_query_parameter_never_brands_a_page(client, svc, verify_claims, shop):
    for query in (f"&brand={shop}", f"&app={shop}", f"&app_id={shop}", f"&brand_app_id={shop}"):
        page = _verify_page(client, svc, verify_claims, None, query)
        assert page.status_code == 200
        assert "Shop" not in page.get_data(as_text=True)
        assert page.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    signup = client.get(f"/signup?brand={shop}&app={shop}")
    assert "Shop" not in signup.get_data(as_text=True)


def test_a_token_without_a_brand_shows_the_services_name(app_with, svc, verify_claims, shop):
    client = app_with(AUTHSVC_PRODUCT_NAME="Acme Accounts").test_client()
    page = _verify_page(client, svc, verify_claims, None)
    assert "<bdi>Acme Accounts</bdi>" in _header(page)
    assert "<title>Confirm your email address · \u2068Acme Accounts\u2069</title>" in (
        page.get_data(as_text=True))
    assert "authsvc" not in text_of(page)


def test_a_token_signed_with_another_key_brands_nothing(client, svc, verify_claims, shop):
    forged = TokenCodec(["an attacker's key, not ours, 0123456789"], {"verify": 3600})
    token = forged.mint(replace(verify_claims, brand_app_id=shop))
    page = client.get(f"/verify?token={token}")
    assert page.status_code == 400  # the link is not valid, and the page is the service's
    assert "Shop" not in page.get_data(as_text=True)
    assert page.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY


def test_a_revoked_or_unknown_app_falls_back_to_the_services_brand(client, conn, svc,
                                                                  verify_claims, shop):
    unknown = _verify_page(client, svc, verify_claims, UUID(int=7))
    assert "<bdi>authsvc</bdi>" in _header(unknown)
    conn.execute("UPDATE apps SET revoked_at = now() WHERE id = %s", (shop,))
    revoked = _verify_page(client, svc, verify_claims, shop)
    assert "<bdi>authsvc</bdi>" in _header(revoked)
    assert LOGO not in revoked.get_data(as_text=True)
    assert revoked.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY


def test_a_product_name_is_escaped_and_isolated_everywhere(client, conn, svc,
                                                           verify_claims, shop):
    name = "<script>alert(1)</script>\u202eevil\u2067x\u2069"
    _brand(conn, shop, product_name=name)
    page = _verify_page(client, svc, verify_claims, shop)
    html = page.get_data(as_text=True)
    assert "<script>" not in html
    # The name's own direction controls are gone, and the name is isolated in the header
    # and the title: nothing in it can reorder the words around it.
    assert "\u202e" not in html and "\u2067" not in html
    assert "<bdi>&lt;script&gt;alert(1)&lt;/script&gt; evil x</bdi>" in _header(page)
    assert "\u2068&lt;script&gt;alert(1)&lt;/script&gt; evil x\u2069</title>" in html
    assert html.count("\u2069") == 1  # the title's own isolate, closed once


@pytest.mark.parametrize("logo", [
    "http://cdn.shop.example/logo.png",               # not https
    "https://cdn.shop.example/logo.png' data: *;x",   # would inject CSP sources
    "https://user:pass@cdn.shop.example/logo.png",    # credentials
    "https://cdn.shop.example:99999/logo.png",        # no such port
    "https://[::1]/logo.png",                         # not an origin we name
    "https://cdn shop.example/logo.png",
    "javascript:alert(1)",
])
def test_a_logo_is_shown_only_from_a_plain_https_origin(logo):
    brand = page_brand_of(Brand("Shop", logo_url=logo, app_id=UUID(int=1)))
    assert brand.logo_url is None and brand.logo_origin is None


@pytest.mark.parametrize("colour", ["red", "#abc", "#aabbcc;}body{display:none", "#aabbccdd",
                                    "#gggggg", "url(x)", ""])
def test_a_colour_is_used_only_as_rrggbb(colour):
    assert page_brand_of(Brand("Shop", brand_color=colour, app_id=UUID(int=1))).colour_rule is None


def test_a_support_link_is_only_http_or_https():
    assert page_brand_of(Brand("S", support_url="javascript:alert(1)")).support_url is None
    assert page_brand_of(Brand("S", support_url="https://s.example/h")).support_url == (
        "https://s.example/h")


def test_the_csp_admits_the_logo_only_on_a_branded_link_page(client, svc, verify_claims, shop):
    branded = _verify_page(client, svc, verify_claims, shop)
    policy = branded.headers["Content-Security-Policy"]
    assert "img-src 'self' https://cdn.shop.example;" in policy
    # Images only: scripts stay banned, other fetches stay 'none'.
    assert "default-src 'none'" in policy and "script-src" not in policy
    assert "https://cdn.shop.example" not in policy.replace(
        "img-src 'self' https://cdn.shop.example;", "")
    for path in ("/signup", "/login", "/reset", "/no-such-page"):
        assert client.get(path).headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY


# --- what a real brand looks like ---------------------------------------------------


def test_a_branded_link_page_shows_the_apps_name_logo_colour_and_help(client, svc,
                                                                     verify_claims, shop):
    page = _verify_page(client, svc, verify_claims, shop)
    html = page.get_data(as_text=True)
    header = _header(page)
    assert f'<img class="brand-logo" src="{LOGO}" alt=""' in header
    assert "<bdi>Shop</bdi>" in header
    assert "<style>:root{--brand:#aa3300}</style>" in html
    # The one inline rule is allowed by its hash, nothing else inline.
    assert "style-src 'self' 'sha256-" in page.headers["Content-Security-Policy"]
    assert 'href="https://shop.example/help" rel="noopener noreferrer"' in html


@pytest.mark.parametrize(("purpose", "path"), [
    ("verify", "/verify"), ("reset", "/reset/confirm"), ("sign_in", "/sign-in"),
    ("email_change", "/email-change/confirm"), ("account_delete", "/account/delete"),
    ("email_revert", "/email-change/undo"),
])
def test_each_link_page_shows_its_tokens_brand(client, conn, svc, shop, purpose, path):
    make_account(conn, svc, ANN, verified=purpose != "verify")
    recipient = ANN
    if purpose == "reset":
        actions.request_password_reset(conn, svc, email=ANN)
    elif purpose == "sign_in":
        actions.request_sign_in(conn, svc, email=ANN)
    elif purpose == "account_delete":
        deletion.request_account_deletion(conn, svc, email=ANN, password=PASSWORD)
    elif purpose in ("email_change", "email_revert"):
        email_change.request_email_change(conn, svc, email=ANN, new_email="ann@new.example",
                                          password=PASSWORD)
        recipient = "ann@new.example"
    if purpose == "email_revert":
        email_change.confirm_email_change(
            conn, svc, token=svc.tokens.mint(latest_claims(conn, recipient, "email_change")),
            purpose="email_change")
        recipient = ANN
    claims = latest_claims(conn, recipient, purpose)
    token = svc.tokens.mint(replace(claims, brand_app_id=shop))
    page = client.get(f"{path}?token={token}")
    assert page.status_code == 200, text_of(page)
    assert "<bdi>Shop</bdi>" in _header(page)


def test_a_dead_links_page_still_shows_its_brand(client, conn, svc, verify_claims, shop):
    # An older link, replaced by a newer one: the page explains, in the app's brand.
    make_account(conn, svc, "bob@example.com")
    actions.request_verification(conn, svc, email=ANN)
    page = _verify_page(client, svc, verify_claims, shop)
    assert page.status_code == 410
    assert "<bdi>Shop</bdi>" in _header(page)


def test_the_posted_form_keeps_the_brand(client, conn, svc, verify_claims, shop):
    from tests.pages_support import submit_on_link_page

    token = svc.tokens.mint(replace(verify_claims, brand_app_id=shop))
    done = submit_on_link_page(client, "/verify", "/verify", token)
    assert done.status_code == 200, text_of(done)
    assert "<bdi>Shop</bdi>" in _header(done)


def test_a_brands_default_locale_comes_after_the_browsers(client, conn, svc,
                                                         verify_claims, shop):
    _brand(conn, shop, default_locale="de")
    german = _verify_page(client, svc, verify_claims, shop)
    assert german.headers["Content-Language"] == "de"
    assert "Bestätigen Sie, dass" in text_of(german)
    token = svc.tokens.mint(replace(verify_claims, brand_app_id=shop))
    french = client.get(f"/verify?token={token}", headers={"Accept-Language": "fr-CA"})
    assert french.headers["Content-Language"] == "fr"
