"""Which language a page is in (SPEC §14), and that it says so.

Precedence: ?lang= > the `lang` cookie > Accept-Language > the brand's
default > en. Nothing a browser sends about languages ever makes an error.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlsplit

import pytest

from authsvc.locales import SUPPORTED_LOCALES, translations
from authsvc.web.pages.language import choose_page_locale
from tests.pages_support import make_account, sign_in, submit, text_of

_HTML = re.compile(r'<html lang="([^"]+)" dir="(ltr|rtl)">')
_SWITCHER = re.compile(r'<a href="([^"]+)" lang="([^"]+)" hreflang="[^"]+"')


def _html_lang(response) -> tuple[str, str]:
    match = _HTML.search(response.get_data(as_text=True))
    assert match, "no <html lang dir>"
    return match.group(1), match.group(2)


def _says(response, locale: str) -> None:
    """The page is in `locale` and says so, in its headers and its markup."""
    assert response.headers["Content-Language"] == locale
    assert _html_lang(response)[0] == locale
    vary = {v.strip() for v in response.headers["Vary"].split(",")}
    assert {"Accept-Language", "Cookie"} <= vary


# --- nothing a browser sends about languages is an error -------------------------------


@pytest.mark.parametrize("lang", ["", "x", "de-", "../../etc/passwd", "de\x00", "dé",
                                  "x" * 40, "<script>", "de;q=1", "ja", "de&lang=fr"])
def test_a_malformed_or_unknown_lang_is_ignored_without_a_cookie(client, lang):
    page = client.get("/signup", query_string={"lang": lang})
    assert page.status_code == 200
    _says(page, "en")
    assert client.get_cookie("lang") is None


@pytest.mark.parametrize("header", ["*", ";;;,,,===", "de;q=banana,,", "\x7f", "es," * 5000,
                                    "q=1", "de-DE;q=2", "zz-ZZ", "ar;q=0"])
def test_junk_accept_language_never_errors(client, header):
    page = client.get("/login", headers={"Accept-Language": header})
    assert page.status_code == 200


def test_a_junk_cookie_is_ignored(client):
    client.set_cookie("lang", "<script>")
    _says(client.get("/login"), "en")
    client.set_cookie("lang", "ja")
    _says(client.get("/login", headers={"Accept-Language": "fr"}), "fr")


# --- the precedence ------------------------------------------------------------------


def test_the_choice_takes_query_then_cookie_then_browser_then_brand_then_english():
    pick = choose_page_locale
    assert pick(query="de", cookie="fr", accept_language="es", brand_default="ar") == "de"
    assert pick(query=None, cookie="fr", accept_language="es", brand_default="ar") == "fr"
    assert pick(query=None, cookie=None, accept_language="es", brand_default="ar") == "es"
    assert pick(query=None, cookie=None, accept_language=None, brand_default="ar") == "ar"
    assert pick(query=None, cookie=None, accept_language=None, brand_default=None) == "en"
    # Each falls through when it names nothing shipped, or is malformed.
    assert pick(query="ja", cookie="x y", accept_language="zz", brand_default="pt-PT") == "pt-BR"
    assert pick(query="de-AT", cookie=None, accept_language=None, brand_default=None) == "de"


def test_lang_chooses_and_the_cookie_remembers(client):
    first = client.get("/login?lang=pt-br")
    _says(first, "pt-BR")
    cookie = first.headers["Set-Cookie"]
    assert cookie.startswith("lang=pt-BR;")
    assert "SameSite=Lax" in cookie and "Path=/" in cookie
    assert "Secure" not in cookie  # the test base URL is http
    # The cookie now outranks the browser's preference; a new ?lang= outranks the cookie.
    _says(client.get("/signup", headers={"Accept-Language": "fr"}), "pt-BR")
    _says(client.get("/signup?lang=ar", headers={"Accept-Language": "fr"}), "ar")
    _says(client.get("/signup", headers={"Accept-Language": "fr"}), "ar")


def test_the_cookie_is_secure_when_the_base_url_is_https(app_with):
    client = app_with(AUTHSVC_BASE_URL="https://auth.example.com").test_client()
    assert "Secure" in client.get("/login?lang=de").headers["Set-Cookie"]


def test_accept_language_chooses_without_a_cookie(client):
    page = client.get("/login", headers={"Accept-Language": "ja, fr-CH;q=0.9, en;q=0.1"})
    _says(page, "fr")
    assert client.get_cookie("lang") is None


def test_the_lang_of_a_redirect_is_remembered(client):
    """`/?lang=de` on its way to /login: the cookie carries the choice there."""
    answer = client.get("/?lang=de")
    assert answer.status_code == 303
    assert answer.headers["Set-Cookie"].startswith("lang=de;")
    _says(client.get(answer.headers["Location"]), "de")


# --- every page says which language it is in -------------------------------------------


@pytest.mark.parametrize("path", ["/signup", "/login", "/reset", "/verify/request",
                                  "/sign-in/request", "/verify/code", "/reset/code",
                                  "/sign-in/code", "/email-change/code",
                                  "/email-change/approve/code", "/account/delete/code",
                                  "/check-email?sent=signup", "/verify?token=junk",
                                  "/reset/confirm?token=junk", "/no-such-page", "/logout"])
@pytest.mark.parametrize("locale", ["de", "ar"])
def test_every_page_says_its_language_and_direction(client, path, locale):
    page = client.get(path, headers={"Accept-Language": locale})
    _says(page, locale)
    assert _html_lang(page)[1] == ("rtl" if locale == "ar" else "ltr")


def test_the_error_pages_are_translated(client):
    missing = client.get("/no-such-page", headers={"Accept-Language": "de"})
    assert missing.status_code == 404
    assert "Seite nicht gefunden" in text_of(missing)
    refused = client.post("/login", data={}, headers={"Accept-Language": "ar"})
    assert refused.status_code == 400
    assert "انتهت صلاحية هذا النموذج" in text_of(refused)


def test_a_page_in_german_and_in_arabic_reads_translated(client):
    german = text_of(client.get("/signup?lang=de"))
    assert "Konto erstellen" in german and "Create an account" not in german
    assert "Mindestens 8 Zeichen." in german
    arabic = text_of(client.get("/signup?lang=ar"))
    assert "إنشاء حساب" in arabic and "Create an account" not in arabic


@pytest.mark.parametrize("locale", [tag for tag in SUPPORTED_LOCALES if tag != "en"])
def test_each_shipped_language_renders_from_its_own_catalog(client, locale):
    catalog = translations(locale, "pages")
    page = client.get(f"/signup?lang={locale}")
    _says(page, locale)
    heading = catalog.gettext("Create an account")
    assert heading != "Create an account"
    assert f"<h1>{heading}</h1>" in page.get_data(as_text=True)


def test_durations_and_form_errors_are_in_the_pages_language(client):
    client.set_cookie("lang", "de")
    check = text_of(client.get("/check-email?sent=reset"))
    assert "Er läuft in 30 Minuten ab." in check, check  # the reset link's default lifetime
    refused = submit(client, "/signup", {"email": "not an address", "password": "x"})
    assert refused.status_code == 422
    # The address library's own English reason, said generically in German.
    assert "Das ist keine gültige E-Mail-Adresse." in text_of(refused)
    refused = submit(client, "/signup", {"email": "a%b@example.com", "password": "x"})
    assert "Die E-Mail-Adresse darf weder % noch ! enthalten." in text_of(refused)


def test_a_weak_password_is_refused_in_the_pages_language_with_its_plural(client):
    client.set_cookie("lang", "ar")
    refused = submit(client, "/signup", {"email": "ann@example.com", "password": "short"})
    assert refused.status_code == 422
    assert "استخدم 8 أحرف على الأقل." in text_of(refused)
    client.set_cookie("lang", "fr")
    refused = submit(client, "/signup", {"email": "ann@example.com", "password": "short"})
    assert "Utilisez au moins 8 caractères." in text_of(refused)


def test_the_account_page_dates_and_flashes_follow_the_language(client, conn, svc, clock):
    sign_in(client, make_account(conn, svc))
    page = client.get("/account?lang=es")
    _says(page, "es")
    text = text_of(page)
    assert "Tu cuenta" in text
    now = clock()
    assert isinstance(now, datetime) and now.tzinfo == UTC
    assert f"Confirmado el {now.day} de " in text, text
    ended = submit(client, "/account/sessions/end", {"session_id": "all"}, form_page="/account")
    assert ended.status_code == 303
    login = client.get(ended.headers["Location"])
    assert "Se han cerrado todas las sesiones, también esta." in text_of(login)


# --- the switcher ----------------------------------------------------------------------


def _switcher(response) -> dict[str, str]:
    html = response.get_data(as_text=True)
    nav = re.search(r'<nav aria-label="[^"]*">\s*<ul class="languages">(.*?)</ul>', html, re.S)
    assert nav, "no language switcher"
    return {lang: href.replace("&amp;", "&") for href, lang in _SWITCHER.findall(nav.group(1))}


def test_every_page_links_itself_in_every_language(client):
    page = client.get("/check-email?sent=reset&lang=de", headers={"Accept-Language": "fr"})
    links = _switcher(page)
    assert list(links) == list(SUPPORTED_LOCALES)
    for locale, href in links.items():
        parts = urlsplit(href)
        assert parts.path == "/check-email" and not parts.netloc
        assert parse_qsl(parts.query) == [("sent", "reset"), ("lang", locale)]
    html = page.get_data(as_text=True)
    assert re.search(r'lang="de" hreflang="de" aria-current="true">Deutsch<', html)


def test_a_links_page_switches_language_keeping_its_token_on_the_same_page(client, conn, svc):
    from tests.link_support import latest_link

    make_account(conn, svc, "ann@example.com", verified=False)
    token = latest_link(conn, svc, "ann@example.com", "verify")
    page = client.get(f"/verify?token={token}")
    arabic = _switcher(page)["ar"]
    assert urlsplit(arabic).path == "/verify"  # the token goes nowhere but its own page
    assert dict(parse_qsl(urlsplit(arabic).query)) == {"token": token, "lang": "ar"}
    assert page.headers["Referrer-Policy"] == "no-referrer"
    switched = client.get(arabic)
    _says(switched, "ar")
    assert switched.headers["Referrer-Policy"] == "no-referrer"
    assert switched.headers["Cache-Control"] == "no-store"


def test_a_post_only_path_switches_to_the_start(client, conn, svc):
    sign_in(client, make_account(conn, svc))
    refused = submit(client, "/account/password", {"current": "wrong", "new": "x"},
                     form_page="/account")
    assert refused.status_code == 422
    assert {urlsplit(href).path for href in _switcher(refused).values()} == {"/"}


# --- the operator console speaks the same languages --------------------------------------


def test_the_console_follows_the_pages_language(app, conn, svc):
    from tests.console_support import make_operator, post, signed_in_console

    make_operator(conn, svc)
    client = signed_in_console(app, conn, svc)
    overview = client.get("/admin/?lang=ar")
    assert overview.status_code == 200
    _says(overview, "ar")
    assert _html_lang(overview) == ("ar", "rtl")
    text = text_of(overview)
    assert "نظرة عامة" in text and "Overview" not in text
    assert list(_switcher(overview)) == list(SUPPORTED_LOCALES)
    # The choice is the pages' own: the cookie the console set carries to /login.
    _says(client.get("/login"), "ar")
    jobs = client.get("/admin/jobs?status=nonsense&lang=de")
    assert "unbekannter Status 'nonsense'" in text_of(jobs)
    from tests.accounts_support import stored_user

    ann = stored_user(conn, make_account(conn, svc))
    sign_in(client.application.test_client(), ann.email)  # one web session of hers
    ended = post(client, f"/admin/accounts/{ann.id}/end-sessions",
                 form_page=f"/admin/accounts/{ann.id}")
    assert ended.status_code == 303
    assert "1 Sitzung beendet." in text_of(client.get(ended.headers["Location"]))


def test_the_console_sign_in_is_translated(client):
    page = client.get("/admin/login", headers={"Accept-Language": "fr"})
    _says(page, "fr")
    assert "Connexion opérateur" in text_of(page)


@pytest.mark.parametrize("path", ["//evil.example/x", "/\\evil.example/x", "///evil.example",
                                  "/%2F%2Fevil.example", "/a b\"<x>"])
def test_the_switcher_never_links_to_another_host(client, path):
    page = client.get(path)
    assert page.status_code == 404
    for href in _switcher(page).values():
        parts = urlsplit(href)
        assert not parts.netloc and not parts.scheme, href
        assert href.startswith("/") and not href.startswith(("//", "/\\")), href
