"""`authsvc check`: verify a configuration before starting it, one line per check (SPEC §15).

Each check prints `ok`, `FAIL` or `skip`, its name and what it found, never
a secret; the exit status is 1 if any check failed or could not run. The
mail check greets the server (EHLO, STARTTLS and login as configured, then
QUIT), or makes one authenticated read-only call to an HTTP provider
(authsvc/worker/providers/http.py, `greet`), and sends nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import click
import psycopg

from authsvc.cli.startup import database_url_or_exit
from authsvc.config import ConfigError, Settings, load_settings
from authsvc.db.connections import connect
from authsvc.db.migrate import available_migrations, pending_migrations
from authsvc.locales import CatalogMissing, load_catalogs
from authsvc.worker.mailers import SmtpMailer, TransientSendError
from authsvc.worker.providers import HTTP_PROVIDERS

TIMEOUT = 10.0
# Which check a settings problem belongs to, by the variable it names first.
_PROBLEM_CHECKS = (
    ("AUTHSVC_SECRET_KEYS", "secrets"),
    ("AUTHSVC_BASE_URL", "base url"),
    ("AUTHSVC_METRICS_TOKEN", "metrics token"),
    ("AUTHSVC_MAIL_URL", "mail transport"),
    ("AUTHSVC_SMTP_URL", "mail transport"),
    ("AUTHSVC_DATABASE_URL", "database"),
    ("AUTHSVC_DIRECT_DATABASE_URL", "database"),
)
# Stand-ins for the settings production requires, so the other checks can still run
# while one of these is broken: each is used only when its own line already fails.
_STAND_INS = {
    "AUTHSVC_SECRET_KEYS": "x" * 32,
    "AUTHSVC_METRICS_TOKEN": "x" * 16,
    "AUTHSVC_MAIL_URL": "smtp://localhost",
    "AUTHSVC_DATABASE_URL": "postgresql://localhost/unused",
    "AUTHSVC_BASE_URL": "https://localhost",
}
_VARIABLE = re.compile(r"\b(?:AUTHSVC|PROMETHEUS)_[A-Z0-9_]+\b")


@dataclass(frozen=True)
class Outcome:
    name: str
    status: str  # "ok", "FAIL" or "skip"
    detail: str


def _check_of(problem: str) -> str:
    return next((c for var, c in _PROBLEM_CHECKS if problem.startswith(var)), "settings")


def _by_check(problems: list[str]) -> dict[str, str]:
    """Each settings problem on its check's line; one with no line of its own on `settings`."""
    by_check: dict[str, list[str]] = {}
    for problem in problems:
        by_check.setdefault(_check_of(problem), []).append(problem)
    return {name: "; ".join(found) for name, found in by_check.items()}


def _settings_apart_from(problems: list[str]) -> Settings | None:
    """The settings loaded again with every variable a problem names set aside (its
    default, or a stand-in where production requires one), so the checks those
    variables do not decide still run; None if they still do not load."""
    named = {var for problem in problems for var in _VARIABLE.findall(problem)}
    if "AUTHSVC_SMTP_URL" in named:  # the older name of the mail setting
        named.add("AUTHSVC_MAIL_URL")
    overrides = {var: _STAND_INS.get(var, "") for var in named}
    try:
        return load_settings(None, **overrides)
    except ConfigError:
        return None


def _secrets(settings: Settings) -> Outcome:
    count = len(settings.secret_keys)
    rotation = f", {count - 1} older one(s) still accepted" if count > 1 else ""
    if not settings.production:
        return Outcome("secrets", "ok", f"{count} key(s){rotation} (development keys allowed)")
    return Outcome("secrets", "ok", f"{count} key(s) of 32+ characters{rotation}")


def _base_url(settings: Settings) -> Outcome:
    scheme = urlsplit(settings.base_url).scheme
    if scheme == "https":
        return Outcome("base url", "ok", settings.base_url)
    if settings.production:
        return Outcome("base url", "FAIL", f"{settings.base_url}: production links must use https")
    return Outcome("base url", "ok", f"{settings.base_url} (http: development only)")


def _metrics_token(settings: Settings) -> Outcome:
    if settings.metrics_token:
        return Outcome("metrics token", "ok", "set: /metrics asks for it")
    if settings.production:
        return Outcome("metrics token", "FAIL", "AUTHSVC_METRICS_TOKEN: required in production")
    return Outcome("metrics token", "ok", "not set: /metrics is open (development only)")


def _without_password(text: str, url: str | None) -> str:
    """`text` with the URL's password taken out: libpq quotes what it cannot parse, and
    that may be the password itself."""
    password = urlsplit(url).password if url else None
    for form in {password, unquote(password)} if password else ():
        text = text.replace(form, "***")
    return text


def _database(settings: Settings) -> tuple[Outcome, Outcome]:
    where = "AUTHSVC_DATABASE_URL" if settings.database_url else "the embedded PostgreSQL"
    try:
        url = database_url_or_exit(settings)
        with connect(url, connect_timeout=int(TIMEOUT)) as conn:
            version = conn.info.server_version
            pending = pending_migrations(conn)
    except click.ClickException as exc:
        return (Outcome("database", "FAIL", exc.message),
                Outcome("migrations", "skip", "needs the database"))
    except psycopg.Error as exc:
        reason = _without_password(" ".join(str(exc).split()) or type(exc).__name__,
                                   settings.database_url)
        return (Outcome("database", "FAIL", f"{where}: {reason}"),
                Outcome("migrations", "skip", "needs the database"))
    server = f"PostgreSQL {version // 10000}.{version % 10000}"
    database = Outcome("database", "ok", f"{where} answers ({server})")
    if pending:
        names = ", ".join(m.version for m in pending)
        return database, Outcome("migrations", "FAIL",
                                 f"{len(pending)} pending ({names}): run `authsvc db upgrade`")
    latest = available_migrations()[-1].version
    return database, Outcome("migrations", "ok", f"current (latest {latest})")


def _mail(settings: Settings) -> Outcome:
    if settings.null_mail:
        return Outcome("mail transport", "ok", "null:// discards every email (load tests only)")
    if settings.http_provider is not None:
        return _http_provider(settings)
    if settings.smtp is None:
        return Outcome("mail transport", "FAIL", "no AUTHSVC_MAIL_URL set: nothing would be sent")
    target = settings.smtp
    where = f"smtp {target.host}:{target.port} ({target.security})"
    try:
        SmtpMailer(target, timeout=TIMEOUT).greet()
    except TransientSendError as exc:
        return Outcome("mail transport", "FAIL", f"{where}: {exc}")
    logged_in = ", logged in" if target.username else ""
    return Outcome("mail transport", "ok", f"{where} greeted{logged_in}; nothing sent")


def _http_provider(settings: Settings) -> Outcome:
    """One authenticated, read-only call, made by the provider's own mailer (it knows the
    base URL, the path and how the key goes); never a send."""
    provider = settings.http_provider
    assert provider is not None
    where = f"{provider.provider} at {provider.base_url}"
    greeting = HTTP_PROVIDERS[provider.provider](provider, timeout=TIMEOUT).greet()
    return Outcome("mail transport", "ok" if greeting.ok else "FAIL",
                   f"{where}: {greeting.detail}; nothing sent")


def _translations() -> Outcome:
    """Every shipped compiled catalog loads (the web app and the worker refuse to start
    without them)."""
    try:
        count = load_catalogs()
    except CatalogMissing as exc:
        return Outcome("translations", "FAIL", str(exc))
    return Outcome("translations", "ok", f"{count} compiled catalogs load")


def _settings_line(settings: Settings | None, failed: dict[str, str]) -> Outcome:
    if "settings" in failed:
        return Outcome("settings", "FAIL", failed["settings"])
    if settings is None:
        return Outcome("settings", "FAIL", "not loaded")
    mode = "production" if settings.production else settings.env
    apart = " apart from the FAIL line(s) below" if failed else ""
    return Outcome("settings", "ok", f"valid ({mode}){apart}")


def _decided(settings: Settings | None, failed: dict[str, str]) -> list[Outcome]:
    """The lines settings decide: a broken setting fails its own line, and every other
    check runs on the rest of the settings (migrations only once a database answers)."""
    outcomes = [_settings_line(settings, failed)]
    for name, run in (("secrets", _secrets), ("base url", _base_url),
                      ("metrics token", _metrics_token)):
        if name in failed:
            outcomes.append(Outcome(name, "FAIL", failed[name]))
        elif settings is None:
            outcomes.append(Outcome(name, "skip", "needs valid settings"))
        else:
            outcomes.append(run(settings))
    if "database" in failed:
        outcomes += [Outcome("database", "FAIL", failed["database"]),
                     Outcome("migrations", "skip", "needs the database")]
    elif settings is None:
        outcomes += [Outcome(n, "skip", "needs valid settings") for n in ("database",
                                                                          "migrations")]
    else:
        outcomes.extend(_database(settings))
    if "mail transport" in failed:
        outcomes.append(Outcome("mail transport", "FAIL", failed["mail transport"]))
    elif settings is None:
        outcomes.append(Outcome("mail transport", "skip", "needs valid settings"))
    else:
        outcomes.append(_mail(settings))
    return outcomes


def run_checks() -> list[Outcome]:
    try:
        settings: Settings | None = load_settings()
        failed: dict[str, str] = {}
    except ConfigError as exc:
        failed = _by_check(exc.problems)
        settings = _settings_apart_from(exc.problems)
    return [*_decided(settings, failed), _translations()]


@click.command("check")
def check() -> None:
    """Verify the configuration before starting: one line per check, exit 1 if any fails."""
    outcomes = run_checks()
    width = max(len(o.name) for o in outcomes)
    for outcome in outcomes:
        click.echo(f"{outcome.status:<4}  {outcome.name:<{width}}  {outcome.detail}")
    if any(o.status != "ok" for o in outcomes):
        raise SystemExit(1)
