"""The pages in German and Arabic in Chromium: axe-core on each, the switcher without
JavaScript, right-to-left that mirrors, and the Arabic screenshots in docs/.

axe-core is injected from disk (tests/browser/node_modules, `make browser`) into a
context that bypasses the CSP only for that. Screenshots go to the test's temp
folder; with AUTHSVC_UPDATE_SCREENSHOTS=1 they refresh docs/screenshots/.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from authsvc.accounts import actions, deletion, email_change
from authsvc.apps.keys import register_app
from authsvc.locales import translations
from testkit.servers import serving
from tests.browser_support import (
    AXE_MARK,
    BROWSER_MARKS,
    BROWSER_TIMEOUT_MS,
    new_tab,
    serious_violations,
)
from tests.link_support import latest_claims, latest_link
from tests.pages_support import PASSWORD, make_account

pytestmark = BROWSER_MARKS

# Pages anyone can open, each with its forms' errors shown where it has a form.
OPEN_PAGES = ("/signup", "/login", "/reset", "/verify/request", "/sign-in/request",
              "/verify/code", "/reset/code", "/sign-in/code", "/email-change/code",
              "/email-change/approve/code", "/account/delete/code", "/check-email?sent=signup",
              "/verify?token=not-a-token", "/no-such-page", "/logout")


@pytest.fixture
def page(browser) -> Iterator[Page]:
    with new_tab(browser, java_script_enabled=False,
                 viewport={"width": 1100, "height": 900}) as tab:
        yield tab


def _branded_verify_token(conn: Any, svc: Any, email: str, *, product_name: str,
                          brand_color: str, support_url: str) -> str:
    """The verify token of a new, unconfirmed account at `email`, branded for the app "shop"."""
    app, _key = register_app(conn, "shop", ["https://shop.example/welcome"])
    conn.execute("UPDATE apps SET product_name = %s, brand_color = %s, support_url = %s"
                 " WHERE id = %s", (product_name, brand_color, support_url, app.id))
    make_account(conn, svc, email, verified=False)
    return svc.tokens.mint(replace(latest_claims(conn, email, "verify"), brand_app_id=app.id))


def _link_pages(conn: Any, svc: Any) -> list[str]:
    """A live link of each kind that opens a page, the confirmation one branded."""
    verify = _branded_verify_token(conn, svc, "new@example.com", product_name="Shop",
                                   brand_color="#aa3300", support_url="https://shop.example/help")
    make_account(conn, svc, "ann@example.com")
    make_account(conn, svc, "bob@example.com")
    actions.request_password_reset(conn, svc, email="ann@example.com")
    actions.request_sign_in(conn, svc, email="ann@example.com")
    email_change.request_email_change(conn, svc, email="bob@example.com",
                                      new_email="bob@elsewhere.example", password=PASSWORD)
    change = latest_link(conn, svc, "bob@elsewhere.example", "email_change")
    email_change.confirm_email_change(conn, svc, token=change, purpose="email_change")
    deletion.request_account_deletion(conn, svc, email="ann@example.com", password=PASSWORD)
    return [
        f"/verify?token={verify}",
        f"/reset/confirm?token={latest_link(conn, svc, 'ann@example.com', 'reset')}",
        f"/sign-in?token={latest_link(conn, svc, 'ann@example.com', 'sign_in')}",
        f"/email-change/confirm?token={change}",  # used now: the "already used" page
        f"/email-change/undo?token={latest_link(conn, svc, 'bob@example.com', 'email_revert')}",
        f"/account/delete?token={latest_link(conn, svc, 'ann@example.com', 'account_delete')}",
    ]


@AXE_MARK
@pytest.mark.parametrize("locale", ["de", "ar"])
def test_every_page_in_german_and_arabic_has_no_serious_accessibility_violation(
        browser, base_url, app_with, conn, svc, locale):
    links = _link_pages(conn, svc)
    context = browser.new_context(bypass_csp=True, java_script_enabled=True)
    tab = context.new_page()
    tab.set_default_timeout(BROWSER_TIMEOUT_MS)
    audited: dict[str, list[dict[str, Any]]] = {}
    try:
        tab.goto(f"{base_url}/login?lang={locale}")  # the cookie keeps it from here on
        for path in (*OPEN_PAGES, *links):
            tab.goto(base_url + path)
            assert tab.get_attribute("html", "lang") == locale, path
            audited[path] = serious_violations(tab)
        # A form with its errors, then the signed-in account page.
        tab.goto(f"{base_url}/signup")
        tab.locator("form button[type=submit], form input[type=submit]").first.click()
        audited["/signup (errors)"] = serious_violations(tab)
        tab.goto(f"{base_url}/login")
        tab.locator("input[type=email]").fill("ann@example.com")
        tab.locator("input[type=password]").fill(PASSWORD)
        tab.locator("form input[type=submit]").first.click()
        tab.wait_for_url(f"{base_url}/account")
        audited["/account"] = serious_violations(tab)
        audited.update(_result_pages(tab, base_url, conn, svc, locale))
    finally:
        context.close()
    audited.update(_pending_page(browser, app_with, conn, svc, locale))
    assert {path: found for path, found in audited.items() if found} == {}


def _submit(tab: Page) -> None:
    """Press the page's own form button (not the language switcher's links)."""
    tab.locator("main form input[type=submit], main form button[type=submit]").first.click()
    tab.wait_for_load_state()


def _audit(tab: Page, locale: str, name: str, title: str | None = None
           ) -> list[dict[str, Any]]:
    """axe on the page `name`, after checking it is in `locale` (and, given the English
    `title`, that it is that page)."""
    assert tab.get_attribute("html", "lang") == locale, name
    if title is not None:
        assert tab.title().startswith(translations(locale, "pages").gettext(title)), name
    return serious_violations(tab)


def _result_pages(tab: Page, base_url: str, conn: Any, svc: Any,
                  locale: str) -> dict[str, list[dict[str, Any]]]:
    """The pages a flow ends on, each reached by pressing its form's button, as people do:
    the confirmation, a change asked and done, its undo, a taken address, a code refused
    and a deletion."""
    audited: dict[str, list[dict[str, Any]]] = {}
    make_account(conn, svc, "vera@example.com", verified=False)
    tab.goto(f"{base_url}/verify?token={latest_link(conn, svc, 'vera@example.com', 'verify')}")
    _submit(tab)
    audited["verified"] = _audit(tab, locale, "verified", "Email address confirmed")

    make_account(conn, svc, "carol@example.com")
    email_change.request_email_change(conn, svc, email="carol@example.com",
                                      new_email="carol@new.example", password=PASSWORD)
    change = latest_link(conn, svc, "carol@new.example", "email_change")
    tab.goto(f"{base_url}/email-change/confirm?token={change}")
    audited["email_change_confirm"] = _audit(tab, locale, "email_change_confirm",
                                             "Confirm your new email address")
    _submit(tab)
    audited["email_changed"] = _audit(tab, locale, "email_changed", "Email address changed")
    tab.goto(f"{base_url}/email-change/undo?token="
             f"{latest_link(conn, svc, 'carol@example.com', 'email_revert')}")
    _submit(tab)
    audited["email_restored"] = _audit(tab, locale, "email_restored", "Email address restored")

    make_account(conn, svc, "dave@example.com")
    email_change.request_email_change(conn, svc, email="dave@example.com",
                                      new_email="taken@example.com", password=PASSWORD)
    taken = latest_link(conn, svc, "taken@example.com", "email_change")
    make_account(conn, svc, "taken@example.com")
    tab.goto(f"{base_url}/email-change/confirm?token={taken}")
    _submit(tab)
    audited["email_taken"] = _audit(tab, locale, "email_taken", "This address is taken")

    make_account(conn, svc, "erin@example.com")
    deletion.request_account_deletion(conn, svc, email="erin@example.com", password=PASSWORD)
    tab.goto(f"{base_url}/account/delete/code")
    tab.locator("main input[type=email]").fill("erin@example.com")
    tab.locator("main input[name=code]").fill("000000")
    _submit(tab)
    audited["account_code (refused)"] = _audit(tab, locale, "account_code")
    tab.goto(f"{base_url}/account/delete?token="
             f"{latest_link(conn, svc, 'erin@example.com', 'account_delete')}")
    _submit(tab)
    audited["account_deleted"] = _audit(tab, locale, "account_deleted", "Account deleted")
    return audited


def _pending_page(browser: Any, app_with: Any, conn: Any, svc: Any,
                  locale: str) -> dict[str, list[dict[str, Any]]]:
    """"The change waits for the other address": only where both addresses must confirm."""
    make_account(conn, svc, "fay@example.com")
    email_change.request_email_change(conn, svc, email="fay@example.com",
                                      new_email="fay@new.example", password=PASSWORD)
    change = latest_link(conn, svc, "fay@new.example", "email_change")
    context = browser.new_context(bypass_csp=True, java_script_enabled=True)
    try:
        with serving(app_with(AUTHSVC_EMAIL_CHANGE_CONFIRM_OLD="on")) as strict:
            tab = context.new_page()
            tab.set_default_timeout(BROWSER_TIMEOUT_MS)
            tab.goto(f"{strict}/email-change/confirm?token={change}&lang={locale}")
            _submit(tab)
            return {"email_change_pending": _audit(tab, locale, "email_change_pending",
                                                   "New address confirmed")}
    finally:
        context.close()


def test_the_switcher_works_without_javascript(page, base_url):
    page.goto(f"{base_url}/signup")
    expect(page.get_by_role("heading", name="Create an account")).to_be_visible()
    page.get_by_role("navigation", name="Language").get_by_role("link", name="Deutsch").click()
    expect(page.get_by_role("heading", name="Konto erstellen")).to_be_visible()
    assert page.get_attribute("html", "lang") == "de"
    # Remembered: the next page is German too, and says which language is current.
    page.get_by_role("link", name="Anmelden").first.click()
    expect(page.get_by_role("heading", name="Anmelden")).to_be_visible()
    current = page.get_by_role("navigation", name="Sprache").get_by_role("link", name="Deutsch")
    assert current.get_attribute("aria-current") == "true"
    page.get_by_role("navigation", name="Sprache").get_by_role("link", name="العربية").click()
    expect(page.get_by_role("heading", name="تسجيل الدخول")).to_be_visible()
    assert page.get_attribute("html", "dir") == "rtl"
    page.get_by_role("navigation", name="اللغة").get_by_role("link", name="English").click()
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()


def test_arabic_pages_mirror_and_are_photographed(page, base_url, conn, svc, screenshots):
    page.goto(f"{base_url}/signup?lang=ar")
    expect(page.get_by_role("heading", name="إنشاء حساب")).to_be_visible()
    # Right to left: the brand is on the right, the account links on the left.
    brand = page.locator(".site-header .brand").bounding_box()
    nav = page.locator(".site-header nav").bounding_box()
    assert brand is not None and nav is not None and brand["x"] > nav["x"]
    heading = page.get_by_role("heading", name="إنشاء حساب").bounding_box()
    card = page.locator("main.card").bounding_box()
    assert heading is not None and card is not None
    assert heading["x"] + heading["width"] > card["x"] + card["width"] - 80  # starts at the right
    page.get_by_role("button", name="إنشاء الحساب").click()  # shows the errors too
    screenshots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(screenshots / "pages-ar-signup.png"), full_page=True)

    make_account(conn, svc, "ann@example.com")
    page.goto(f"{base_url}/login")
    page.get_by_label("البريد الإلكتروني").fill("ann@example.com")
    page.get_by_label("كلمة المرور").fill(PASSWORD)
    page.get_by_role("button", name="تسجيل الدخول", exact=True).click()
    expect(page.get_by_role("heading", name="حسابك")).to_be_visible()
    page.screenshot(path=str(screenshots / "pages-ar-account.png"), full_page=True)


def test_a_branded_link_page_in_german_is_photographed(page, base_url, conn, svc, screenshots):
    token = _branded_verify_token(conn, svc, "anna@example.com",
                                  product_name="Blumenladen Müller", brand_color="#1e7a43",
                                  support_url="https://shop.example/hilfe")
    page.goto(f"{base_url}/verify?token={token}&lang=de")
    expect(page.get_by_role("heading", name="E-Mail-Adresse bestätigen")).to_be_visible()
    expect(page.locator(".site-header .brand")).to_have_text("Blumenladen Müller")
    border = page.locator(".site-header").evaluate(
        "e => getComputedStyle(e).borderTopColor")
    assert border == "rgb(30, 122, 67)"  # the brand's colour, through the CSP's hash
    screenshots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(screenshots / "pages-de-branded.png"), full_page=True)
