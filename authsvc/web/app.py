"""The Flask application factory."""

from __future__ import annotations

from flask import Flask
from flask_wtf.csrf import CSRFProtect
from psycopg_pool import ConnectionPool
from werkzeug.middleware.proxy_fix import ProxyFix

from authsvc.accounts.passwords import Passwords
from authsvc.accounts.sessions import SESSION_LIFETIME
from authsvc.clock import Clock, system_clock
from authsvc.config import Settings, load_settings
from authsvc.db.connections import create_pool, is_direct, resolve_database_url, resolve_listen_url
from authsvc.locales import load_catalogs
from authsvc.observability.logs import configure_logging
from authsvc.resources import templates_dir
from authsvc.services import build_services
from authsvc.web.plumbing import install_request_plumbing

MAX_BODY_BYTES = 64 * 1024


def create_app(
    settings: Settings | None = None,
    *,
    pool: ConnectionPool | None = None,
    clock: Clock = system_clock,
    passwords: Passwords | None = None,
) -> Flask:
    """Build the web app; tests inject settings, a pool, a clock and cheap hashing."""
    settings = settings or load_settings()
    load_catalogs()  # a build without its compiled catalogs stops here, saying so
    if pool is None:
        url = resolve_database_url(settings)
        # No round trip per checkout: a failed request checks the whole pool
        # instead (authsvc.web.database_failed).
        pool = create_pool(url, check=False, direct=is_direct(url, resolve_listen_url(settings)))

    app = Flask(__name__, template_folder=str(templates_dir()), static_folder=None)
    app.config.update(
        SECRET_KEY=settings.secret_keys[0],
        SECRET_KEY_FALLBACKS=list(settings.secret_keys[1:]),
        MAX_CONTENT_LENGTH=MAX_BODY_BYTES,
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=settings.production,
        PERMANENT_SESSION_LIFETIME=SESSION_LIFETIME,  # the cookie; the row decides
        WTF_CSRF_TIME_LIMIT=None,  # tied to the session instead of a clock
        WTF_CSRF_SSL_STRICT=settings.production,
    )
    if settings.trusted_proxies:
        app.wsgi_app = ProxyFix(  # type: ignore[method-assign]
            app.wsgi_app, x_for=settings.trusted_proxies, x_proto=settings.trusted_proxies
        )
    app.extensions["authsvc"] = build_services(settings, pool, clock=clock, passwords=passwords)
    install_request_plumbing(app)

    from authsvc.observability import probes
    from authsvc.web import api, console, pages

    csrf = CSRFProtect(app)
    csrf.exempt(api.bp)  # bearer-key API: no cookies, so no CSRF
    app.register_blueprint(probes.bp)
    from authsvc.observability import metrics
    app.register_blueprint(metrics.bp)
    app.register_blueprint(api.bp)
    app.register_blueprint(pages.bp)
    app.register_blueprint(console.bp)  # /admin, the operator console
    from authsvc.bounces import provider_notifications

    csrf.exempt(provider_notifications.bp)  # signed by the provider, no cookies
    app.register_blueprint(provider_notifications.bp)
    provider_notifications.install_readers(app, settings)
    # The test inbox (/_inbox) is not here: `authsvc inbox --http-port` serves it.
    return app


def create_served_app() -> Flask:
    """The app as gunicorn serves it: settings from the environment, JSON logs on stderr."""
    configure_logging()  # before the settings, so a refusal is logged as JSON too
    settings = load_settings()
    configure_logging(settings.log_level)
    return create_app(settings)
