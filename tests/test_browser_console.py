"""The operator console in Chromium (JavaScript off): sign in with the password and the
emailed code, look at the queue, cancel a job; axe-core on every console page.

axe-core is injected from disk (tests/browser/node_modules, `make browser`) into a
context of its own that bypasses the CSP only for that. Screenshots go to the test's
temp folder; with AUTHSVC_UPDATE_SCREENSHOTS=1 they refresh docs/screenshots/.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from authsvc.accounts import actions
from authsvc.bounces import suppressions
from tests.accounts_support import one_number, stored_user
from tests.browser_support import (
    AXE_MARK,
    BROWSER_MARKS,
    BROWSER_TIMEOUT_MS,
    new_tab,
    serious_violations,
)
from tests.console_support import OPERATOR, emailed_code, make_operator
from tests.pages_support import PASSWORD, make_account
from tests.webhook_support import register_webhook_app
from tests.worker_support import worker

pytestmark = BROWSER_MARKS


@pytest.fixture
def page(browser) -> Iterator[Page]:
    with new_tab(browser, java_script_enabled=False,
                 viewport={"width": 1200, "height": 900}) as tab:
        yield tab


def _sign_in(page: Page, base_url: str, conn: Any, svc: Any) -> None:
    page.goto(f"{base_url}/admin/")
    expect(page.get_by_role("heading", name="Operator sign-in")).to_be_visible()
    page.get_by_label("Email address").fill(OPERATOR)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Continue").click()
    expect(page.get_by_role("heading", name="Enter your code")).to_be_visible()
    page.get_by_label("Code from the email").fill(emailed_code(conn, svc))
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()


def test_sign_in_redrive_a_failed_job_then_cancel_it(
        page, base_url, database_url, conn, svc, settings, smtp, screenshots):
    operator = make_operator(conn, svc)
    for name in ("ann", "bob", "cat"):
        make_account(conn, svc, f"{name}@example.com")
        actions.request_password_reset(conn, svc, email=f"{name}@example.com")
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()  # three sent
    actions.request_password_reset(conn, svc, email="ann@example.com")
    smtp.mode = "reject"
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()  # ann's fails
    job_id = one_number(conn, "SELECT id FROM email_jobs WHERE status = 'failed'")
    _sign_in(page, base_url, conn, svc)
    expect(page.get_by_text("3 sent, 1 failed in the last hour")).to_be_visible()
    page.screenshot(path=str(screenshots / "console-overview.png"), full_page=True)

    page.get_by_role("link", name="Jobs", exact=True).click()
    page.get_by_label("Status").select_option("failed")
    page.get_by_role("button", name="Filter").click()
    page.get_by_role("link", name=str(job_id), exact=True).click()
    expect(page.get_by_role("heading", name=f"Job {job_id}")).to_be_visible()
    page.get_by_role("button", name="Redrive").click()
    expect(page.get_by_text(f"Job {job_id} is queued again with fresh attempts.")).to_be_visible()
    expect(page.get_by_text(f"redriven by operator {operator.id}")).to_be_visible()
    page.screenshot(path=str(screenshots / "console-job.png"), full_page=True)

    page.get_by_role("button", name="Cancel").click()
    expect(page.get_by_text(f"Job {job_id} is cancelled")).to_be_visible()
    assert conn.execute("SELECT status FROM email_jobs WHERE id = %s", (job_id,)).fetchone() \
        == ("cancelled",)

    page.get_by_role("link", name="Operator log").click()
    expect(page.get_by_role("cell", name="job.redrive")).to_be_visible()
    expect(page.get_by_role("cell", name="job.cancel")).to_be_visible()
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Operator sign-in")).to_be_visible()
    page.goto(f"{base_url}/admin/jobs")
    expect(page.get_by_role("heading", name="Operator sign-in")).to_be_visible()


@AXE_MARK
@pytest.mark.parametrize("locale", ["en", "de", "ar"])
def test_every_console_page_in_each_language_has_no_serious_violation(
        browser, base_url, conn, svc, settings, locale):
    make_operator(conn, svc)
    ann = stored_user(conn, make_account(conn, svc, "ann@example.com"))
    actions.request_password_reset(conn, svc, email="ann@example.com")
    job_id = one_number(conn, "SELECT id FROM email_jobs WHERE template = 'reset'")
    # Rows for every listing, so each page is scanned with its table, not its empty state.
    suppressions.suppress(conn, "gone@example.org", event="hard_bounce", provider="ses",
                          provider_message_id=None)
    register_webhook_app(conn, settings, "https://hooks.shop.example/authsvc")
    with_tables = {"/admin/jobs", "/admin/suppressions", "/admin/apps", "/admin/log"}
    context = browser.new_context(bypass_csp=True)
    tab = context.new_page()
    tab.set_default_timeout(BROWSER_TIMEOUT_MS)
    audited: dict[str, list[dict[str, Any]]] = {}
    try:
        tab.goto(f"{base_url}/admin/login?lang={locale}")
        audited["/admin/login"] = serious_violations(tab)
        tab.locator("input[type=email]").fill(OPERATOR)
        tab.locator("input[type=password]").fill(PASSWORD)
        tab.locator("form input[type=submit]").click()
        tab.wait_for_url(f"{base_url}/admin/login/code")
        audited["/admin/login/code"] = serious_violations(tab)
        tab.locator("input[name=code]").fill(emailed_code(conn, svc))
        tab.locator("form input[type=submit]").click()
        tab.wait_for_url(f"{base_url}/admin/")
        for path in ("/admin/", "/admin/jobs", f"/admin/jobs/{job_id}", "/admin/accounts",
                     f"/admin/accounts/{ann.id}", "/admin/suppressions", "/admin/apps",
                     "/admin/log"):
            tab.goto(base_url + path)
            assert tab.get_attribute("html", "lang") == locale, path
            if path in with_tables:
                assert tab.locator("table tbody tr").count() >= 1, path
            audited[path] = serious_violations(tab)
    finally:
        context.close()
    assert {path: found for path, found in audited.items() if found} == {}


