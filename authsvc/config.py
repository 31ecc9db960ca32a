"""Settings from the environment: the only module that reads os.environ.

Every malformed value is reported at once, before anything touches the
database, so an operator fixes a bad deployment in one round trip.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import SplitResult, parse_qsl, unquote, urlsplit

_TRUE = {"1", "true", "on", "yes"}
_FALSE = {"0", "false", "off", "no"}
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^\s*(\d+)\s*([smhd]?)\s*$")
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([smhd])\s*$")
SMTP_SCHEMES = {"smtp", "smtp+starttls", "smtps"}
# HTTP providers by AUTHSVC_MAIL_URL scheme (authsvc/worker/providers/, docs/providers.md);
# `NAME+http` is for local fakes only.
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
HTTP_PROVIDERS = ("resend", "postmark", "ses", "sendgrid", "mailgun", "brevo")
HTTP_PROVIDER_SCHEMES = {
    **{name: "https" for name in HTTP_PROVIDERS},
    **{f"{name}+http": "http" for name in HTTP_PROVIDERS},
}
# The query options each provider's URL may carry (anything else is refused).
PROVIDER_URL_OPTIONS = {
    "postmark": ("message_stream",),
    "ses": ("region", "configuration_set"),
}
# SES: the region is in its API host, email.REGION.amazonaws.com.
_SES_HOST = re.compile(r"^email\.([a-z]{2}(?:-[a-z]+)+-\d)\.amazonaws\.com$")
_AWS_REGION = re.compile(r"^[a-z]{2}(?:-[a-z]+)+-\d$")
_MAILGUN_DOMAIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")
# Beyond this PostgreSQL's timestamps overflow; no lifetime needs more.
MAX_DURATION_SECONDS = 36500 * 86400
_BYTES = re.compile(r"^\s*(\d+)\s*(?:([kmg])(?:i?b)?)?\s*$", re.IGNORECASE)
_BYTE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
MIN_INBOX_BYTES = 1024**2
MAX_INBOX_BYTES = 64 * 1024**3


class ConfigError(Exception):
    """Raised with every configuration problem found, one per line."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("invalid configuration:\n" + "\n".join(f"  - {p}" for p in problems))


@dataclass(frozen=True)
class RateLimit:
    """`limit` events per `window_seconds`, e.g. 5/15m."""

    limit: int
    window_seconds: int

    def __str__(self) -> str:
        return f"{self.limit}/{self.window_seconds}s"


@dataclass(frozen=True)
class SmtpTarget:
    """Where the worker delivers mail."""

    host: str
    port: int
    security: str  # "plain" | "starttls" | "ssl"
    username: str | None = None
    password: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class HttpProviderTarget:
    """An HTTP mail provider (AUTHSVC_MAIL_URL=resend://KEY@host[:port], docs/providers.md)."""

    provider: str  # one of HTTP_PROVIDERS
    base_url: str  # scheme://host[:port], no trailing slash
    api_key: str = field(repr=False)  # SES: the access key id
    secret: str | None = field(default=None, repr=False)  # SES: the secret access key
    domain: str | None = None  # Mailgun: the sending domain (the URL's path)
    region: str | None = None  # SES: the region its requests are signed for
    options: tuple[tuple[str, str], ...] = ()  # the URL's documented query options

    def option(self, name: str) -> str | None:
        return dict(self.options).get(name)


@dataclass(frozen=True)
class ProviderWebhooks:
    """How each provider's bounce notifications are verified (docs/providers.md); None: off.

    Each set value enables POST /webhooks/provider/NAME for that provider.
    """

    resend_secret: str | None = field(default=None, repr=False)  # whsec_…: Svix signatures
    postmark_auth: str | None = field(default=None, repr=False)  # user:password, or a token
    ses_topic_arns: tuple[str, ...] = ()  # the SNS topics whose messages count
    sendgrid_public_key: str | None = None  # the Event Webhook's verification key (public)
    mailgun_signing_key: str | None = field(default=None, repr=False)
    brevo_auth: str | None = field(default=None, repr=False)  # user:password, or a token


@dataclass(frozen=True)
class Settings:
    env: str
    database_url: str | None
    data_dir: Path
    secret_keys: tuple[str, ...] = field(repr=False)
    base_url: str
    mail_from: str
    # The service's own brand in pages and emails for accounts no app brands (SPEC §14).
    product_name: str
    smtp: SmtpTarget | None
    reset_ttl: int
    verify_ttl: int
    lease_seconds: int
    max_attempts: int
    test_inbox: bool
    test_inbox_domain: str
    test_inbox_token: str | None = field(repr=False)
    rate_limit_email: RateLimit
    rate_limit_ip: RateLimit
    rate_limit_app: RateLimit
    rate_limit_login: RateLimit
    trusted_proxies: int = 0
    metrics_token: str | None = field(default=None, repr=False)
    # AUTHSVC_LOG_LEVEL: the least severe line written (info: every claim and outcome).
    log_level: str = "INFO"
    # AUTHSVC_MAIL_URL=null://: build every message and discard it (load tests).
    null_mail: bool = False
    # AUTHSVC_MAIL_URL=resend://…: an HTTP provider instead of SMTP.
    http_provider: HttpProviderTarget | None = None
    # How POST /webhooks/provider/NAME verifies each provider's notifications.
    provider_webhooks: ProviderWebhooks = field(default_factory=ProviderWebhooks)
    # AUTHSVC_DIRECT_DATABASE_URL: the server itself, not a pooler (LISTEN; SPEC §11).
    direct_database_url: str | None = None
    # PROMETHEUS_MULTIPROC_DIR (set by `authsvc serve`): /metrics sums every process's files.
    metrics_multiproc_dir: Path | None = None
    # AUTHSVC_TEST_INBOX_MAX_BYTES: the whole test inbox's bytes (452 beyond them).
    test_inbox_max_bytes: int = 256 * 1024**2
    # SPEC §12: link lifetimes of an address change, its undo and an account deletion.
    email_change_ttl: int = 3600
    email_revert_ttl: int = 604800
    delete_ttl: int = 3600
    # AUTHSVC_EMAIL_CHANGE_CONFIRM_OLD: the old address must confirm a change too.
    email_change_confirm_old: bool = False
    # SPEC §13: the sign-in link and code's lifetime.
    sign_in_ttl: int = 900
    # AUTHSVC_NOTIFY_UNKNOWN_ADDRESSES: reset and sign-in requests for an address with no
    # account send its mailbox a "no account uses this address" note.
    notify_unknown_addresses: bool = False

    @property
    def production(self) -> bool:
        return self.env == "production"


def parse_bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"expected one of 1/0, true/false, on/off, got {value!r}")


def parse_duration(value: str) -> int:
    """Seconds from '1800', '30m', '24h' or '7d'."""
    match = _DURATION.match(value)
    if not match:
        raise ValueError(f"expected a duration such as 1800, 30m, 24h or 7d, got {value!r}")
    seconds = int(match.group(1)) * _UNITS[match.group(2) or "s"]
    if seconds <= 0:
        raise ValueError("must be positive")
    if seconds > MAX_DURATION_SECONDS:
        raise ValueError(f"must be at most {MAX_DURATION_SECONDS // 86400} days")
    return seconds


def parse_inbox_bytes(value: str) -> int:
    """Bytes from '268435456', '256M', '256MiB' or '1G' (binary units), 1 MiB to 64 GiB."""
    match = _BYTES.match(value)
    if not match:
        raise ValueError(f"expected a size such as 256M or 1G, got {value!r}")
    size = int(match.group(1)) * _BYTE_UNITS[(match.group(2) or "").lower()]
    if not MIN_INBOX_BYTES <= size <= MAX_INBOX_BYTES:
        raise ValueError("must be between 1M and 64G")
    return size


def parse_rate_limit(value: str) -> RateLimit:
    """'5/15m' → five per fifteen minutes."""
    match = _RATE.match(value)
    if not match:
        raise ValueError(f"expected COUNT/WINDOW such as 5/15m or 600/1m, got {value!r}")
    count, multiple, unit = int(match.group(1)), int(match.group(2) or 1), match.group(3)
    if count <= 0 or multiple <= 0:
        raise ValueError("count and window must be positive")
    return RateLimit(count, multiple * _UNITS[unit])


def _host_and_port(parts: SplitResult) -> tuple[str, int | None]:
    """The URL's host and port (None when it names none); ValueError without a host."""
    if not parts.hostname:
        raise ValueError("needs a host")
    try:
        return parts.hostname, parts.port
    except ValueError as exc:
        raise ValueError(f"bad port: {exc}") from None


def parse_smtp_url(value: str) -> SmtpTarget:
    parts = urlsplit(value)
    if parts.scheme not in SMTP_SCHEMES:
        raise ValueError(f"scheme must be one of {sorted(SMTP_SCHEMES)}, got {parts.scheme!r}")
    hostname, port = _host_and_port(parts)
    security = {"smtp": "plain", "smtp+starttls": "starttls", "smtps": "ssl"}[parts.scheme]
    default_port = {"plain": 25, "starttls": 587, "ssl": 465}[security]
    return SmtpTarget(
        host=hostname,
        port=port or default_port,
        security=security,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
    )


def parse_http_provider_url(value: str) -> HttpProviderTarget:
    """NAME://API_KEY@host[:port] (https), or NAME+http://… for a local fake.

    The forms that differ: ses://ACCESS_KEY_ID:SECRET@email.REGION.amazonaws.com
    (or ?region=R on another host), mailgun://KEY@host/DOMAIN, and the query
    options in PROVIDER_URL_OPTIONS.
    """
    parts = urlsplit(value)
    scheme = parts.scheme.lower()
    if scheme not in HTTP_PROVIDER_SCHEMES:
        raise ValueError(f"scheme must be one of {sorted(HTTP_PROVIDER_SCHEMES)}, got {scheme!r}")
    provider = scheme.split("+")[0]
    hostname, port = _host_and_port(parts)
    if not parts.username:
        raise ValueError(f"needs the API key as the user part: {provider}://API_KEY@host")
    api_key = unquote(parts.username)
    secret = unquote(parts.password) if parts.password is not None else None
    if provider == "ses":
        if not secret:
            raise ValueError("needs the access key id and the secret access key:"
                             " ses://ACCESS_KEY_ID:SECRET@email.REGION.amazonaws.com")
    elif secret is not None:
        # The key is the user part; a password part would be a mistake to keep silently.
        raise ValueError(f"needs the API key as the user part only: {provider}://API_KEY@host")
    for credential in (api_key, secret or ""):
        if not credential.isprintable() or " " in credential:
            raise ValueError("the API key has spaces or control characters")
    if parts.fragment:
        raise ValueError("takes no fragment")
    path = parts.path.strip("/")
    domain = None
    if provider == "mailgun":
        if not _MAILGUN_DOMAIN.fullmatch(path):
            raise ValueError("needs the sending domain as the path: mailgun://KEY@host/DOMAIN")
        domain = path.lower()
    elif path:
        raise ValueError("takes no path")
    try:
        query = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise ValueError(f"cannot read its query {parts.query!r}") from None
    allowed = PROVIDER_URL_OPTIONS.get(provider, ())
    unknown = sorted({k for k, _ in query} - set(allowed))
    if unknown:
        hint = f"only {', '.join(allowed)}" if allowed else "no query"
        raise ValueError(f"takes {hint}, got {', '.join(unknown)}")
    options = tuple(sorted(dict(query).items()))
    region = None
    if provider == "ses":
        from_host = _SES_HOST.match(hostname.lower())
        region = dict(options).get("region") or (from_host.group(1) if from_host else None)
        if region is None or not _AWS_REGION.fullmatch(region):
            raise ValueError("needs its region: the host email.REGION.amazonaws.com,"
                             " or ?region=REGION")
    host = f"[{hostname}]" if ":" in hostname else hostname
    base_url = f"{HTTP_PROVIDER_SCHEMES[scheme]}://{host}" + (f":{port}" if port else "")
    return HttpProviderTarget(provider=provider, base_url=base_url, api_key=api_key,
                              secret=secret, domain=domain, region=region, options=options)


def _check_webhook_secret(value: str) -> None:
    """A Standard Webhooks secret: whsec_ and base64 of at least 24 bytes."""
    body = value.removeprefix("whsec_")
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("expected whsec_ followed by base64") from None
    if len(raw) < 24:
        raise ValueError("the secret is shorter than 24 bytes")


_SNS_TOPIC_ARN = re.compile(r"^arn:aws(?:-cn|-us-gov)?:sns:[a-z]{2}(?:-[a-z]+)+-\d:\d{12}:"
                            r"[A-Za-z0-9_-]{1,256}$")
MIN_WEBHOOK_CREDENTIAL_LENGTH = 16


def parse_webhook_auth(value: str) -> str:
    """user:password (HTTP basic) or a bearer token; the secret part at least 16 characters."""
    if not value.isprintable() or any(c.isspace() for c in value):
        raise ValueError("has spaces or control characters")
    user, colon, password = value.partition(":")
    secret = password if colon else value
    if colon and not user:
        raise ValueError("expected user:password or a token, got an empty user")
    if len(secret) < MIN_WEBHOOK_CREDENTIAL_LENGTH:
        raise ValueError(f"the password or token is shorter than {MIN_WEBHOOK_CREDENTIAL_LENGTH}"
                         " characters")
    return value


def parse_topic_arns(value: str) -> tuple[str, ...]:
    """Comma-separated SNS topic ARNs."""
    arns = tuple(a.strip() for a in value.split(",") if a.strip())
    bad = [a for a in arns if not _SNS_TOPIC_ARN.fullmatch(a)]
    if bad or not arns:
        raise ValueError("not an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME):"
                         f" {bad or value!r}")
    return arns


def parse_ecdsa_public_key(value: str) -> str:
    """SendGrid's verification key: base64 DER of a P-256 public key."""
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_der_public_key

    try:
        key = load_der_public_key(base64.b64decode(value, validate=True))
    except (binascii.Error, ValueError):
        raise ValueError("expected the base64 public key SendGrid shows") from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise ValueError("expected an ECDSA P-256 public key")
    return value


def _scheme(url: str) -> str | None:
    """The URL's scheme, or None when it does not even parse (e.g. 'http://[::1')."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises on a malformed port)
    except ValueError:
        return None
    return parts.scheme


def _dev_secret_keys(data_dir: Path) -> tuple[str, ...]:
    """A signing key generated once per data dir, so dev links survive restarts."""
    path = data_dir / "secret-key"
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        # O_EXCL: two processes starting at once must agree on one key.
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_urlsafe(48) + "\n")
    key = path.read_text().strip()
    if not key:  # another process is between create and write
        raise ConfigError([f"{path} is empty; delete it to regenerate the dev key"])
    return (key,)


def load_settings(environ: Mapping[str, str] | None = None, **overrides: str) -> Settings:
    """Read and validate AUTHSVC_* variables; raise ConfigError listing every problem."""
    env = dict(os.environ if environ is None else environ)
    env.update(overrides)
    problems: list[str] = []

    def get(name: str, default: str | None = None) -> str | None:
        value = env.get(name)
        return default if value is None or value.strip() == "" else value.strip()

    def parsed(name: str, default: str, parser, what: str = "") -> object:  # type: ignore[no-untyped-def]
        raw = get(name, default)
        try:
            return parser(raw)
        except ValueError as exc:
            problems.append(f"{name}: {exc}{what}")
            return parser(default)

    mode = (get("AUTHSVC_ENV", "development") or "").lower()
    if mode not in {"development", "production", "test"}:
        problems.append(f"AUTHSVC_ENV: expected development, production or test, got {mode!r}")
        mode = "development"
    production = mode == "production"

    data_dir = Path(get("AUTHSVC_DATA_DIR", "./.authsvc") or ".authsvc").expanduser().absolute()
    database_url = get("AUTHSVC_DATABASE_URL")
    if database_url and _scheme(database_url) not in {"postgres", "postgresql"}:
        problems.append("AUTHSVC_DATABASE_URL: must be a postgresql:// or postgres:// URL")
    # Running at scale (SPEC §11): AUTHSVC_DATABASE_URL may be a transaction pooler;
    # LISTEN needs a session, so it goes to this URL of the server itself.
    direct_database_url = get("AUTHSVC_DIRECT_DATABASE_URL")
    if direct_database_url and _scheme(direct_database_url) not in {"postgres", "postgresql"}:
        problems.append("AUTHSVC_DIRECT_DATABASE_URL: must be a postgresql:// or postgres:// URL")
    elif direct_database_url and not database_url:
        problems.append(
            "AUTHSVC_DIRECT_DATABASE_URL: set AUTHSVC_DATABASE_URL too (the pooled URL)"
        )
    multiproc_raw = env.get("PROMETHEUS_MULTIPROC_DIR", "").strip()
    metrics_multiproc_dir = Path(multiproc_raw).absolute() if multiproc_raw else None
    if metrics_multiproc_dir and metrics_multiproc_dir.is_file():
        problems.append(f"PROMETHEUS_MULTIPROC_DIR: {metrics_multiproc_dir} is not a folder")
    if data_dir.exists() and not data_dir.is_dir():
        problems.append(f"AUTHSVC_DATA_DIR: {data_dir} exists and is not a folder")

    raw_keys = get("AUTHSVC_SECRET_KEYS")
    keys: tuple[str, ...] = ()
    if raw_keys:
        keys = tuple(k.strip() for k in raw_keys.split(",") if k.strip())
        short = [i + 1 for i, k in enumerate(keys) if len(k) < 32]
        if short:
            problems.append(f"AUTHSVC_SECRET_KEYS: key(s) {short} shorter than 32 characters")

    base_url = (get("AUTHSVC_BASE_URL", "http://127.0.0.1:8000") or "").rstrip("/")
    if _scheme(base_url) not in {"http", "https"} or not urlsplit(base_url).netloc:
        problems.append(f"AUTHSVC_BASE_URL: expected an http(s) URL, got {base_url!r}")
    elif production and _scheme(base_url) != "https":
        problems.append("AUTHSVC_BASE_URL: production links must use https")

    mail_from = get("AUTHSVC_MAIL_FROM", "authsvc <no-reply@localhost>") or ""
    if "@" not in mail_from or any(ord(c) < 32 for c in mail_from):
        problems.append(
            f"AUTHSVC_MAIL_FROM: expected an address such as 'name <a@b>', got {mail_from!r}"
        )

    product_name = get("AUTHSVC_PRODUCT_NAME", "authsvc") or ""
    if (not 1 <= len(product_name) <= 64 or not product_name.isprintable()
            or product_name != product_name.strip()):
        problems.append(
            "AUTHSVC_PRODUCT_NAME: expected 1 to 64 printable characters without surrounding"
            f" spaces, got {product_name!r}"
        )

    # AUTHSVC_MAIL_URL is the setting; AUTHSVC_SMTP_URL, its older name, is
    # still read (the same values), and setting both to different values is refused.
    smtp: SmtpTarget | None = None
    http_provider: HttpProviderTarget | None = None
    mail_name = "AUTHSVC_MAIL_URL"
    smtp_url = get("AUTHSVC_MAIL_URL")
    legacy_url = get("AUTHSVC_SMTP_URL")
    if smtp_url is None:
        smtp_url, mail_name = legacy_url, "AUTHSVC_SMTP_URL"
    elif legacy_url is not None and legacy_url != smtp_url:
        problems.append("AUTHSVC_MAIL_URL and AUTHSVC_SMTP_URL differ; set only AUTHSVC_MAIL_URL")
    null_mail = smtp_url is not None and smtp_url.lower() == "null://"
    if null_mail:
        if production:
            problems.append(f"{mail_name}: null:// discards every email; refused in production")
    elif smtp_url and smtp_url.partition("://")[0].lower() in HTTP_PROVIDER_SCHEMES:
        try:
            http_provider = parse_http_provider_url(smtp_url)
        except ValueError as exc:
            problems.append(f"{mail_name}: {exc}")
        else:
            if production and not http_provider.base_url.startswith("https://"):
                name = http_provider.provider
                problems.append(f"{mail_name}: {name}+http:// is for local fakes; "
                                f"production sends over https ({name}://)")
    elif smtp_url:
        try:
            smtp = parse_smtp_url(smtp_url)
        except ValueError as exc:
            problems.append(f"{mail_name}: {exc}")

    webhook_secret = get("AUTHSVC_PROVIDER_WEBHOOK_SECRET")
    if webhook_secret:
        try:
            _check_webhook_secret(webhook_secret)
        except ValueError as exc:
            problems.append(f"AUTHSVC_PROVIDER_WEBHOOK_SECRET: {exc}")

    def optional(name: str, parser):  # type: ignore[no-untyped-def]
        raw = get(name)
        if raw is None:
            return None
        try:
            return parser(raw)
        except ValueError as exc:
            problems.append(f"{name}: {exc}")
            return None

    provider_webhooks = ProviderWebhooks(
        resend_secret=webhook_secret,
        postmark_auth=optional("AUTHSVC_POSTMARK_WEBHOOK_AUTH", parse_webhook_auth),
        ses_topic_arns=optional("AUTHSVC_SES_WEBHOOK_TOPIC_ARNS", parse_topic_arns) or (),
        sendgrid_public_key=optional("AUTHSVC_SENDGRID_WEBHOOK_PUBLIC_KEY",
                                     parse_ecdsa_public_key),
        mailgun_signing_key=optional("AUTHSVC_MAILGUN_WEBHOOK_SIGNING_KEY", parse_webhook_auth),
        brevo_auth=optional("AUTHSVC_BREVO_WEBHOOK_AUTH", parse_webhook_auth),
    )

    test_inbox = bool(parsed("AUTHSVC_TEST_INBOX", "off", parse_bool))
    inbox_domain = (get("AUTHSVC_TEST_INBOX_DOMAIN", "inbox.test") or "").lower()
    if not re.fullmatch(r"[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?", inbox_domain):
        problems.append(f"AUTHSVC_TEST_INBOX_DOMAIN: not a domain name: {inbox_domain!r}")

    inbox_max_bytes = int(parsed("AUTHSVC_TEST_INBOX_MAX_BYTES", "256M", parse_inbox_bytes))  # type: ignore[call-overload]
    lease_seconds = int(parsed("AUTHSVC_LEASE_SECONDS", "45", parse_duration))  # type: ignore[call-overload]
    max_attempts_raw = get("AUTHSVC_MAX_ATTEMPTS", "8") or "8"
    if not max_attempts_raw.isdigit() or not 1 <= int(max_attempts_raw) <= 100:
        problems.append(
            f"AUTHSVC_MAX_ATTEMPTS: expected a whole number 1-100, got {max_attempts_raw!r}"
        )
        max_attempts_raw = "8"

    trusted_raw = get("AUTHSVC_TRUSTED_PROXIES", "0") or "0"
    if not trusted_raw.isdigit() or int(trusted_raw) > 5:
        problems.append(f"AUTHSVC_TRUSTED_PROXIES: expected 0-5, got {trusted_raw!r}")
        trusted_raw = "0"

    metrics_token = get("AUTHSVC_METRICS_TOKEN")
    if metrics_token and (len(metrics_token) < 16 or not metrics_token.isprintable()):
        problems.append("AUTHSVC_METRICS_TOKEN: use at least 16 printable characters")

    log_level = (get("AUTHSVC_LOG_LEVEL", "info") or "info").upper()
    if log_level not in LOG_LEVELS:
        problems.append(f"AUTHSVC_LOG_LEVEL: expected one of {', '.join(LOG_LEVELS).lower()},"
                        f" got {log_level.lower()!r}")
        log_level = "INFO"

    confirm_old = bool(parsed("AUTHSVC_EMAIL_CHANGE_CONFIRM_OLD", "off", parse_bool))

    if production:
        if not keys:
            problems.append("AUTHSVC_SECRET_KEYS: required in production")
        if not database_url:
            problems.append("AUTHSVC_DATABASE_URL: required in production")
        if not smtp_url:
            problems.append("AUTHSVC_MAIL_URL (or AUTHSVC_SMTP_URL): required in production")
        if test_inbox:
            problems.append("AUTHSVC_TEST_INBOX: the test inbox is refused in production")
        if not metrics_token:
            # Outbox counters move for known addresses only: public, they enumerate.
            problems.append("AUTHSVC_METRICS_TOKEN: required in production")

    settings_kwargs = dict(
        reset_ttl=parsed("AUTHSVC_RESET_TTL", "1800", parse_duration),
        verify_ttl=parsed("AUTHSVC_VERIFY_TTL", "86400", parse_duration),
        email_change_ttl=parsed("AUTHSVC_EMAIL_CHANGE_TTL", "3600", parse_duration),
        email_revert_ttl=parsed("AUTHSVC_EMAIL_REVERT_TTL", "604800", parse_duration),
        delete_ttl=parsed("AUTHSVC_DELETE_TTL", "3600", parse_duration),
        email_change_confirm_old=confirm_old,
        sign_in_ttl=parsed("AUTHSVC_SIGN_IN_TTL", "900", parse_duration),
        notify_unknown_addresses=bool(parsed("AUTHSVC_NOTIFY_UNKNOWN_ADDRESSES", "off",
                                             parse_bool)),
        rate_limit_email=parsed("AUTHSVC_RATE_LIMIT_EMAIL", "5/15m", parse_rate_limit),
        rate_limit_ip=parsed("AUTHSVC_RATE_LIMIT_IP", "30/15m", parse_rate_limit),
        rate_limit_app=parsed("AUTHSVC_RATE_LIMIT_APP", "600/1m", parse_rate_limit),
        rate_limit_login=parsed("AUTHSVC_RATE_LIMIT_LOGIN", "10/15m", parse_rate_limit),
    )
    if problems:
        raise ConfigError(problems)

    if not keys:
        try:
            keys = _dev_secret_keys(data_dir)
        except OSError as exc:
            problem = f"AUTHSVC_DATA_DIR: cannot keep the dev secret key there: {exc}"
            raise ConfigError([problem]) from None

    return Settings(
        env=mode,
        database_url=database_url,
        data_dir=data_dir,
        secret_keys=keys,
        base_url=base_url,
        mail_from=mail_from,
        product_name=product_name,
        smtp=smtp,
        lease_seconds=lease_seconds,
        max_attempts=int(max_attempts_raw),
        test_inbox=test_inbox,
        test_inbox_domain=inbox_domain,
        test_inbox_token=get("AUTHSVC_TEST_INBOX_TOKEN"),
        test_inbox_max_bytes=inbox_max_bytes,
        trusted_proxies=int(trusted_raw),
        metrics_token=metrics_token,
        log_level=log_level,
        null_mail=null_mail,
        http_provider=http_provider,
        provider_webhooks=provider_webhooks,
        direct_database_url=direct_database_url,
        metrics_multiproc_dir=metrics_multiproc_dir,
        **settings_kwargs,  # type: ignore[arg-type]
    )
