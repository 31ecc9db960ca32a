"""The console's pages and actions (SPEC §15): what an operator sees and does, and the log of it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from click.testing import CliRunner

from authsvc.accounts import actions as account_actions
from authsvc.accounts import deletion, users
from authsvc.apps.keys import register_app
from authsvc.bounces import suppressions
from authsvc.cli import main
from authsvc.operators import log
from tests.accounts_support import one_number, stored_user
from tests.address_life_support import changed, confirmed, web_session
from tests.api_support import SIGNUP_PASSWORD
from tests.console_support import (
    OPERATOR,
    emailed_code,
    make_operator,
    post,
    signed_in_console,
)
from tests.link_support import latest_link
from tests.pages_support import PASSWORD, make_account, text_of
from tests.worker_support import worker


def _log(conn) -> list[tuple[str, str, str]]:  # type: ignore[no-untyped-def]
    return [(e.operator_email, e.action, e.target) for e in reversed(log.list_entries(conn))]


def _failed_job(database_url, conn, svc, settings, smtp, email="ann@example.com") -> int:  # type: ignore[no-untyped-def]
    """A reset email the mail server refused for good."""
    account_actions.request_password_reset(conn, svc, email=email)
    smtp.mode = "reject"
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()
    smtp.mode = "accept"
    row = conn.execute("SELECT id, status FROM email_jobs WHERE template = 'reset'"
                       " ORDER BY id DESC LIMIT 1").fetchone()
    assert row is not None and row[1] == "failed"
    return int(row[0])


def test_the_worker_sends_the_code_and_it_signs_the_operator_in(
        app, database_url, conn, svc, settings, smtp):
    make_operator(conn, svc)
    browser = app.test_client()
    post(browser, "/admin/login", {"email": OPERATOR, "password": PASSWORD})
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()
    [message] = [m for m in smtp.messages if m.subject == "Your operator console sign-in code"]
    code = re.search(r"^\s+(\d{6})\s*$", message.text, re.MULTILINE)
    assert code is not None and code.group(1) == emailed_code(conn, svc)
    # The page to type it on is named, but no link signs in: nothing carries a token.
    html = message.message.get_body(preferencelist=("html",))
    assert html is not None and "token=" not in message.text + str(html.get_content())
    answer = post(browser, "/admin/login/code", {"code": code.group(1)})
    assert answer.headers["Location"] == "/admin/"
    assert browser.get("/admin/").status_code == 200
    operator_id = stored_user(conn, OPERATOR).id
    assert _log(conn)[-1] == (OPERATOR, "console.sign_in", f"account {operator_id}")


def test_a_removed_operators_code_email_is_not_sent(app, database_url, conn, svc, settings, smtp):
    operator = make_operator(conn, svc)
    post(app.test_client(), "/admin/login", {"email": OPERATOR, "password": PASSWORD})
    conn.execute("DELETE FROM operators WHERE user_id = %s", (operator.id,))
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()
    assert smtp.messages == []
    assert conn.execute("SELECT status FROM email_jobs WHERE template = 'console_code'") \
        .fetchone() == ("superseded",)


def test_the_overview_shows_the_queue_and_draws_the_last_hour(
        app, database_url, conn, svc, settings, smtp):
    make_operator(conn, svc)
    make_account(conn, svc, "ann@example.com")
    account_actions.request_password_reset(conn, svc, email="ann@example.com")
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()  # sends the reset
    account_actions.request_password_reset(conn, svc, email="ann@example.com")  # pending
    console = signed_in_console(app, conn, svc)
    page = console.get("/admin/")
    html = page.get_data(as_text=True)
    text = text_of(page)
    assert "Pending 2" in text  # the reset and the console code
    assert "Leases held now 0" in text
    assert re.search(r"Oldest due job waiting (under a second|\d+ seconds?) ", text)
    assert re.search(r"<svg class=\"chart\"[^>]*role=\"img\"", html)
    assert re.search(r'<rect [^>]*class="sent"><title>\d\d:\d\d UTC: 1 sent, 0 failed</title>',
                     html)
    assert "1 sent, 0 failed in the last hour" in text


def test_jobs_filter_page_and_show_a_timeline(app, database_url, conn, svc, settings, smtp):
    make_operator(conn, svc)
    for n in range(3):
        make_account(conn, svc, f"user{n}@example.com")
    console = signed_in_console(app, conn, svc)
    listing = text_of(console.get("/admin/jobs?status=pending&kind=email"))
    assert listing.count("verify") == 4  # and the operator's own
    one = text_of(console.get("/admin/jobs?address=user1%40example.com"))
    assert "user1@example.com" in one and "user2@example.com" not in one
    assert console.get("/admin/jobs?status=bogus").status_code == 400
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()
    job_id = one_number(conn, "SELECT id FROM email_jobs WHERE recipient = 'user0@example.com'")
    page = console.get(f"/admin/jobs/{job_id}")
    html = page.get_data(as_text=True)
    # Confirmed before it went: claimed, then superseded.
    assert re.search(r'class="event event-claimed".*class="event event-superseded"', html,
                     re.DOTALL)
    assert console.get("/admin/jobs/999999999").status_code == 404
    # Past PostgreSQL's bigint: not found, not a database error.
    assert console.get(f"/admin/jobs/{2**63}").status_code == 404
    assert console.get(f"/admin/accounts/{2**63}").status_code == 404
    assert console.get("/admin/jobs?before=99999999999999999999999").status_code == 200


def test_paging_walks_every_job_once(app, conn, svc):
    make_operator(conn, svc)
    for n in range(60):
        conn.execute("INSERT INTO email_jobs (template, recipient) VALUES ('password_changed', %s)",
                     (f"p{n}@example.com",))
    console = signed_in_console(app, conn, svc)
    first = console.get("/admin/jobs?template=x").get_data(as_text=True)
    older = re.search(r'href="(/admin/jobs\?before=\d+)"', first)
    assert older is not None
    second = console.get(older.group(1).replace("&amp;", "&")).get_data(as_text=True)
    seen = re.findall(r'href="/admin/jobs/(\d+)"', first) + \
        re.findall(r'href="/admin/jobs/(\d+)"', second)
    assert len(seen) == len(set(seen)) == 62  # with the operator's two emails


def test_redrive_a_failed_job_and_refuse_one_whose_link_was_replaced(
        app, database_url, conn, svc, settings, smtp):
    make_operator(conn, svc)
    make_account(conn, svc, "ann@example.com")
    job_id = _failed_job(database_url, conn, svc, settings, smtp)
    console = signed_in_console(app, conn, svc)
    post(console, f"/admin/jobs/{job_id}/redrive", form_page=f"/admin/jobs/{job_id}")
    assert conn.execute("SELECT status FROM email_jobs WHERE id = %s", (job_id,)).fetchone() \
        == ("pending",)
    # Fail it again, then replace its link: a redrive would send a dead link.
    stale = _failed_job(database_url, conn, svc, settings, smtp)
    account_actions.request_password_reset(conn, svc, email="ann@example.com")
    answer = post(console, f"/admin/jobs/{stale}/redrive", form_page=f"/admin/jobs/{stale}")
    assert "replaced by a newer one" in text_of(console.get(answer.headers["Location"]))
    assert conn.execute("SELECT status FROM email_jobs WHERE id = %s", (stale,)).fetchone() \
        == ("failed",)
    assert [a for _, a, _ in _log(conn)].count("job.redrive") == 1


def test_cancel_only_pending_or_failed_jobs(app, database_url, conn, svc, settings, smtp):
    operator = make_operator(conn, svc)
    make_account(conn, svc, "ann@example.com")
    account_actions.request_password_reset(conn, svc, email="ann@example.com")
    sent = one_number(conn, "SELECT id FROM email_jobs WHERE template = 'reset'")
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()
    failed = _failed_job(database_url, conn, svc, settings, smtp)
    account_actions.request_password_reset(conn, svc, email="ann@example.com")
    pending = one_number(conn, "SELECT max(id) FROM email_jobs WHERE template = 'reset'")
    console = signed_in_console(app, conn, svc)
    for job_id in (failed, pending, sent):
        post(console, f"/admin/jobs/{job_id}/cancel", form_page=f"/admin/jobs/{job_id}")
    statuses = dict(conn.execute("SELECT id, status FROM email_jobs WHERE id = ANY(%s)",
                                 ([failed, pending, sent],)).fetchall())
    assert statuses == {failed: "cancelled", pending: "cancelled", sent: "sent"}
    assert conn.execute("SELECT event, error FROM email_job_events WHERE job_id = %s"
                        " ORDER BY id DESC LIMIT 1", (pending,)).fetchone() \
        == ("cancelled", f"cancelled by operator {operator.id}")
    # A cancelled job is never claimed.
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()
    assert len([m for m in smtp.messages if m.subject == "Reset your password"]) == 1  # `sent`
    assert [a for _, a, _ in _log(conn)].count("job.cancel") == 2
    assert "Cancel" not in text_of(console.get(f"/admin/jobs/{sent}"))


def test_the_account_page_and_each_action_logged(app, api, conn, svc, settings):
    make_operator(conn, svc)
    email = confirmed(api, conn, svc, "ann@example.com")
    changed(api, conn, svc, email, SIGNUP_PASSWORD, "second@example.com")
    web_session(conn, svc, "second@example.com", SIGNUP_PASSWORD)
    user = stored_user(conn, "second@example.com")
    console = signed_in_console(app, conn, svc)
    found = console.get("/admin/accounts?address=Second%40Example.com")
    assert found.headers["Location"] == f"/admin/accounts/{user.id}"
    page = text_of(console.get(f"/admin/accounts/{user.id}"))
    assert "confirmed since" in page and "to ann@example.com" in page  # the live undo link
    assert "started" in page  # the session
    assert "email_changed" in page  # recent emails
    base = f"/admin/accounts/{user.id}"
    for _ in range(settings.rate_limit_login.limit):  # lock the owner out
        with pytest.raises(account_actions.InvalidCredentials):
            account_actions.authenticate(conn, svc, email="second@example.com", password="nope")
    with pytest.raises(account_actions.TooManyAttempts):
        account_actions.authenticate(conn, svc, email="second@example.com",
                                     password=SIGNUP_PASSWORD)
    post(console, f"{base}/lift-lockout", form_page=base)
    post(console, f"{base}/end-sessions", form_page=base)
    post(console, f"{base}/send-reset", form_page=base)
    post(console, f"{base}/void-undo-links", form_page=base)
    assert one_number(conn, "SELECT count(*) FROM web_sessions") == 0
    assert one_number(conn, "SELECT count(*) FROM email_jobs WHERE template = 'reset'") == 1
    assert one_number(conn, "SELECT count(*) FROM email_changes WHERE ended_by = 'voided'") == 1
    account_actions.authenticate(conn, svc, email="second@example.com", password=SIGNUP_PASSWORD)
    assert "None." in text_of(console.get(base)).split("Address changes")[0]
    post(console, f"{base}/delete", form_page=base)
    assert users.find_user_by_id(conn, user.id) is None
    target = f"account {user.id}"
    assert _log(conn)[1:] == [(OPERATOR, action, target) for action in (
        "account.lift_lockout", "account.end_sessions", "account.send_reset",
        "account.void_undo_links", "account.delete")]
    # The deleted account's address is nowhere in the log.
    assert "second@example.com" not in json.dumps([e.as_json() for e in log.list_entries(conn)])
    assert console.get("/admin/accounts?address=nobody%40example.com").status_code == 404


def test_suppressions_search_and_lift(app, conn, svc):
    make_operator(conn, svc)
    for address in ("gone@example.com", "spam@example.org"):
        suppressions.suppress(conn, address, event="hard_bounce", provider="ses",
                              provider_message_id=None)
    console = signed_in_console(app, conn, svc)
    found = text_of(console.get("/admin/suppressions?search=example.org"))
    assert "spam@example.org" in found and "gone@example.com" not in found
    post(console, "/admin/suppressions/lift", {"address": "gone@example.com"},
         form_page="/admin/suppressions")
    assert [s.address for s in suppressions.list_suppressions(conn)] == ["spam@example.org"]
    assert _log(conn)[-1] == (OPERATOR, "suppression.lift", "g\u2022\u2022\u2022@example.com")


def test_apps_show_health_and_revoke_never_a_key(app, conn, svc):
    make_operator(conn, svc)
    shop, key = register_app(conn, "shop", ["https://shop.example.com/"])
    console = signed_in_console(app, conn, svc)
    html = console.get("/admin/apps").get_data(as_text=True)
    assert "shop" in html and key not in html
    post(console, f"/admin/apps/{shop.id}/revoke", form_page="/admin/apps")
    assert "revoked" in text_of(console.get("/admin/apps"))
    assert _log(conn)[-1] == (OPERATOR, "app.revoke", f"app {shop.id}")


def test_apps_show_their_brand_as_plain_text(app, conn, svc):
    make_operator(conn, svc)
    shop, _key = register_app(conn, "shop", ["https://shop.example.com/"])
    register_app(conn, "plain", ["https://plain.example.com/"])
    conn.execute("UPDATE apps SET product_name = %s, brand_color = '#12ab34',"
                 " logo_url = 'https://cdn.shop.example/logo.png', mail_from = %s WHERE id = %s",
                 ("<script>alert(1)</script>‮Shop", "Shop <hi@shop.example>", shop.id))
    page = signed_in_console(app, conn, svc).get("/admin/apps")
    html = page.get_data(as_text=True)
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # The name's direction override is not shown, and the name is isolated all the same.
    assert "<bdi>&lt;script&gt;alert(1)&lt;/script&gt; Shop</bdi>" in html
    assert "\u202e" not in html
    shown = text_of(page)
    for part in ("#12ab34", "logo: https://cdn.shop.example/logo.png",
                 "from: Shop <hi@shop.example>", "the service's own"):
        assert part in shown, part
    assert "<img" not in html  # the console loads nothing from an app's hosts


def _totp_operator(conn, svc, env, email: str = "totp@example.com") -> list[str]:  # type: ignore[no-untyped-def]
    """An operator who set up TOTP with the CLI; the secret and URI it printed once."""
    make_operator(conn, svc, email)
    printed = CliRunner().invoke(main, ["operators", "totp", email], env=env)
    assert printed.exit_code == 0, printed.output
    secret = re.search(r"^secret: (\S+)$", printed.output, re.MULTILINE)
    uri = re.search(r"^uri:\s+(\S+)$", printed.output, re.MULTILINE)
    assert secret and uri, printed.output
    return [secret.group(1), uri.group(1)]


def _sign_in_pages(app, email: str, secrets: list[str]) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    """The sign-in pages an operator goes through, up to a wrong code's answer (the
    sign-in cookie's token joins `secrets`)."""
    from authsvc.web.console.guard import COOKIE_PATH, SIGN_IN_COOKIE

    browser = app.test_client()
    seen = [("/admin/login", browser.get("/admin/login").get_data(as_text=True))]
    post(browser, "/admin/login", {"email": email, "password": PASSWORD})
    cookie = browser.get_cookie(SIGN_IN_COOKIE, path=COOKIE_PATH)
    assert cookie is not None
    secrets.append(cookie.value)
    seen.append(("/admin/login/code", browser.get("/admin/login/code").get_data(as_text=True)))
    wrong = post(browser, "/admin/login/code", {"code": "000000"})
    seen.append(("/admin/login/code (wrong code)", wrong.get_data(as_text=True)))
    return seen


def test_no_console_page_shows_a_usable_link_code_or_key(
        app, api, conn, svc, env, settings, database_url, smtp):
    """Every flow driven first (each action, an app with a webhook, TOTP set up, sign-ins
    half done), then every page scanned for each live link, code, key and secret."""
    from authsvc.web.console.guard import COOKIE_PATH, SESSION_COOKIE
    from tests.webhook_support import register_webhook_app

    make_operator(conn, svc)
    secrets = _totp_operator(conn, svc, env)
    _hooked, hooked_key, whsec = register_webhook_app(
        conn, settings, "https://hooks.shop.example/authsvc", name="hooked")
    old, old_key = register_app(conn, "old", ["https://old.example.com/"])
    secrets += [api.key, hooked_key, whsec, old_key]
    email = confirmed(api, conn, svc, "ann@example.com")
    secrets.append(changed(api, conn, svc, email, SIGNUP_PASSWORD, "second@example.com"))
    secrets.append(web_session(conn, svc, "second@example.com", SIGNUP_PASSWORD))
    make_account(conn, svc, "gone@example.com")
    gone = stored_user(conn, "gone@example.com")
    failed = _failed_job(database_url, conn, svc, settings, smtp, email="gone@example.com")
    account_actions.request_password_reset(conn, svc, email="second@example.com")
    secrets.append(latest_link(conn, svc, "second@example.com", "reset"))
    pending = one_number(conn, "SELECT max(id) FROM email_jobs WHERE template = 'reset'")
    suppressions.suppress(conn, "spam@example.org", event="hard_bounce", provider="ses",
                          provider_message_id=None)
    user = stored_user(conn, "second@example.com")
    console = signed_in_console(app, conn, svc)
    session = console.get_cookie(SESSION_COOKIE, path=COOKIE_PATH)
    assert session is not None
    secrets.append(session.value)

    # Every action, so the log, the trails and the pages have each kind of entry.
    base = f"/admin/accounts/{user.id}"
    for action in ("lift-lockout", "send-reset", "end-sessions", "void-undo-links"):
        post(console, f"{base}/{action}", form_page=base)
    secrets.append(latest_link(conn, svc, "second@example.com", "reset"))
    post(console, f"/admin/jobs/{failed}/redrive", form_page=f"/admin/jobs/{failed}")
    post(console, f"/admin/jobs/{pending}/cancel", form_page=f"/admin/jobs/{pending}")
    post(console, "/admin/suppressions/lift", {"address": "spam@example.org"},
         form_page="/admin/suppressions")
    post(console, f"/admin/apps/{old.id}/revoke", form_page="/admin/apps")
    post(console, f"/admin/accounts/{gone.id}/delete", form_page=f"/admin/accounts/{gone.id}")
    done = [a for _, a, _ in _log(conn)]
    for action in ("account.lift_lockout", "account.send_reset", "account.end_sessions",
                   "account.void_undo_links", "job.redrive", "job.cancel", "suppression.lift",
                   "app.revoke", "account.delete", "operator.totp_set"):
        assert action in done, action

    # Half-done sign-ins last: their codes are the live ones.
    pages = _sign_in_pages(app, OPERATOR, secrets)
    secrets.append(emailed_code(conn, svc))
    pages += _sign_in_pages(app, "totp@example.com", secrets)
    paths = ["/admin/", "/admin/jobs", "/admin/jobs?status=failed", "/admin/jobs?kind=webhook",
             f"/admin/accounts/{user.id}", "/admin/accounts?address=nobody%40example.com",
             "/admin/apps", "/admin/log", "/admin/suppressions",
             "/admin/suppressions?search=example"]
    paths += [f"/admin/jobs/{row[0]}" for row in conn.execute("SELECT id FROM email_jobs")]
    found = console.get("/admin/accounts?address=second%40example.com")
    assert found.headers["Location"] == base
    pages += [("/admin/accounts?address=second%40example.com", found.get_data(as_text=True))]
    for path in paths:
        page = console.get(path)
        # Scanned as an operator sees it, not a bounce to the sign-in page.
        assert page.status_code == (404 if "nobody" in path else 200), path
        pages.append((path, page.get_data(as_text=True)))
    assert "https://hooks.shop.example/authsvc" in dict(pages)["/admin/apps"]
    assert len(set(secrets)) == len(secrets) and all(len(s) >= 6 for s in secrets)
    for path, html in pages:
        for secret in secrets:
            assert secret not in html, (path, secret)
        for shape in ("whsec_", "token=", "otpauth://"):
            assert shape not in html, (path, shape)
    export = CliRunner().invoke(main, ["operators", "log", "--json"], env=env).output
    assert export.count("\n") == len(done)
    assert not any(secret in export for secret in secrets)
    assert "whsec_" not in export and "otpauth://" not in export


def test_the_log_page_and_the_cli_export(app, conn, svc, env):
    make_operator(conn, svc)
    console = signed_in_console(app, conn, svc)
    assert "console.sign_in" in text_of(console.get("/admin/log"))
    result = CliRunner().invoke(main, ["operators", "log", "--json"], env=env)
    assert result.exit_code == 0, result.output
    [entry] = [json.loads(line) for line in result.output.splitlines()]
    assert entry["action"] == "console.sign_in" and entry["operator_email"] == OPERATOR
    assert set(entry) == {"id", "operator_id", "operator_email", "action", "target", "detail",
                          "created_at"}


def test_operators_cli_add_list_remove(conn, svc, env):
    make_account(conn, svc, "ann@example.com")
    make_account(conn, svc, "new@example.com", verified=False)
    runner = CliRunner()
    added = runner.invoke(main, ["operators", "add", " Ann@Example.com "], env=env)
    assert added.exit_code == 0, added.output
    again = runner.invoke(main, ["operators", "add", "ann@example.com"], env=env)
    assert again.exit_code == 1 and "already an operator" in again.output
    unproven = runner.invoke(main, ["operators", "add", "new@example.com"], env=env)
    assert unproven.exit_code == 1 and "not confirmed" in unproven.output
    nobody = runner.invoke(main, ["operators", "add", "nobody@example.com"], env=env)
    assert nobody.exit_code == 1 and "no account uses nobody@example.com" in nobody.output
    bad = runner.invoke(main, ["operators", "add", "not an address"], env=env)
    assert bad.exit_code == 2
    listed = runner.invoke(main, ["operators", "list"], env=env)
    assert listed.output.startswith("ann@example.com  added ")
    assert "never signed in" in listed.output
    removed = runner.invoke(main, ["operators", "remove", "ann@example.com"], env=env)
    assert removed.exit_code == 0, removed.output
    assert runner.invoke(main, ["operators", "list"], env=env).output.startswith("no operators")
    ann = stored_user(conn, "ann@example.com").id
    assert [(a, t) for _, a, t in _log(conn)] == [("operator.add", f"account {ann}"),
                                                  ("operator.remove", f"account {ann}")]


def test_a_deleted_operators_address_leaves_the_log(app, conn, svc, settings):
    operator = make_operator(conn, svc)
    signed_in_console(app, conn, svc)
    deletion.delete_account_by_address(conn, settings.secret_keys, email=OPERATOR,
                                       now=svc.clock())
    [entry] = log.list_entries(conn)
    assert entry.operator_id == operator.id and OPERATOR not in entry.operator_email


def test_a_failing_webhook_target_shows_on_the_overview_and_the_apps_page(
        app, client, conn, svc, settings, clock, database_url):
    """Two deliveries fail in turn; the overview names the target with its latest error
    (not the one that sorts last), and the apps page counts them."""
    from authsvc.worker.delivery import RetryPolicy
    from testkit.waiting import wait_until
    from tests.api_support import ApiCaller
    from tests.webhook_support import register_webhook_app, serving, webhook_worker
    from tests.worker_support import running

    make_operator(conn, svc)
    once = RetryPolicy(max_attempts=1, base_seconds=0.05, cap_seconds=0.1)

    def failed_deliveries(count: int) -> Callable[[], bool]:
        return lambda: one_number(conn, "SELECT count(*) FROM email_jobs WHERE"
                                        " kind = 'webhook' AND status = 'failed'") == count

    with serving(statuses=[500, 404]) as receiver:
        shop, key, _secret = register_webhook_app(conn, settings, receiver.url)
        api = ApiCaller(client, shop, key)
        for n, email in enumerate(("first@example.com", "second@example.com"), 1):
            assert api.post("/signups", {"email": email, "password": PASSWORD}) \
                .status_code == 202
            token = latest_link(conn, svc, email, "verify")
            assert api.post("/verifications/confirm", {"token": token}).status_code == 200
            # Only the user.verified delivery: one at a time, so the errors come in order.
            conn.execute("DELETE FROM email_jobs WHERE kind = 'email'")
            with running(webhook_worker(database_url, settings, clock, retry=once)):
                wait_until(failed_deliveries(n), what=f"{n} failed deliveries")
    console = signed_in_console(app, conn, svc)
    overview = console.get("/admin/").get_data(as_text=True)
    row = re.search(r"<tr><td>shop</td><td>([^<]*)</td><td class=\"num\">(\d+)</td>"
                    r"<td class=\"num\">(\d+)</td><td>([^<]*)</td></tr>", overview)
    assert row is not None, overview
    assert row.groups() == (receiver.url, "2", "0",
                            "attempts exhausted (1): receiver answered HTTP 404")
    apps_page = text_of(console.get("/admin/apps"))
    assert f"{receiver.url}: 0 sent, 2 failed, 0 pending" in apps_page


def test_the_json_export_has_every_entry_unless_limited(conn, env):
    """Past any page size: the export streams the whole log, newest first; --limit cuts it."""
    total = 2_345
    conn.execute(
        "INSERT INTO operator_log (operator_id, operator_email, action, target, detail,"
        " created_at) SELECT NULL, 'command line', 'operator.add', 'account ' || n, '', now()"
        " FROM generate_series(1, %s) AS n", (total,))
    runner = CliRunner()
    everything = runner.invoke(main, ["operators", "log", "--json"], env=env)
    assert everything.exit_code == 0, everything.output
    targets = [json.loads(line)["target"] for line in everything.output.splitlines()]
    assert targets == [f"account {n}" for n in range(total, 0, -1)]
    limited = runner.invoke(main, ["operators", "log", "--json", "--limit", "1500"], env=env)
    assert [json.loads(line)["target"] for line in limited.output.splitlines()] \
        == targets[:1500]
    text = runner.invoke(main, ["operators", "log"], env=env).output
    assert text.count("\n") == total
