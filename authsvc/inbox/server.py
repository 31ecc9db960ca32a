"""The test inbox's one HTTP server (aiohttp): every /_inbox answer, API, pages and live events.

`authsvc inbox --http-port` runs it on the SMTP sink's event loop, alone or,
under `authsvc dev`, in front of gunicorn: then it owns the public port and
forwards every path outside /_inbox to the web app untouched
(authsvc.inbox.proxy). The Flask app has no /_inbox routes.

A long poll (`…/messages?wait=`, `…/expect-one`) or the UI's event stream
is a coroutine parked on one LISTEN connection (authsvc.inbox.waiters), so a
thousand of them cost no thread. The short queries are the functions of
authsvc.inbox.messages, run in a small thread pool (one thread per pooled
connection): the sink, the API and the pages share one implementation of
each query, and a link's state is read by the same code the app redeems with.
"""

from __future__ import annotations

import asyncio
import json
import logging
import mimetypes
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from email.utils import format_datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import jinja2
import psycopg
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler
from psycopg import Connection

from authsvc.inbox import link_states, messages, params
from authsvc.inbox.access import CHALLENGE, UNAUTHORIZED_DETAIL, token_accepted
from authsvc.inbox.answers import expect_one_answer, settle_left
from authsvc.inbox.messages import Seen
from authsvc.inbox.openapi import openapi_document
from authsvc.inbox.params import BadRequest
from authsvc.inbox.proxy import Upstream, problem_response
from authsvc.inbox.scopes import new_scope_name
from authsvc.inbox.waiters import AsyncScopeWatcher
from authsvc.observability.log_redaction import QueryStringFilter
from authsvc.observability.logs import log_event
from authsvc.problem_documents import UNREADABLE_REQUEST_DETAIL
from authsvc.resources import templates_dir
from authsvc.services import Services

log = logging.getLogger(__name__)
T = TypeVar("T")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

PREFIX = "/_inbox"
MAX_BODY_BYTES = 1024 * 1024
# Paths whose errors are problem documents (SPEC §5, §8): the server's own
# refusals there (a body too large to buffer) speak the app's format.
PROBLEM_PATHS = ("/api/v1", PREFIX, "/webhooks/provider")
TOO_LARGE_TITLE = "The request body is too large"  # as authsvc.api.problems says it
EVENTS_HEARTBEAT_SECONDS = 15.0
EVENTS_DEBOUNCE_SECONDS = 0.2
EVENTS_RETRY_MS = 2000
# The database connections (and threads) for the short queries; a waiting
# request holds neither.
DEFAULT_POOL_SIZE = 8

# Every inbox answer, as the web app's own (authsvc.web) would carry them.
SECURITY_HEADERS = {
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
}
# The UI runs one script of its own (live.js, for the live scope list) and
# frames email HTML from its own origin; nothing else may load or run.
UI_POLICY = (
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; "
    "img-src 'self'; frame-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'"
)
# The email's own HTML: its inline styles and inline images, never a script,
# a form, or a request to the network (tracking pixels stay dark).
EMAIL_POLICY = (
    "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "font-src data:; frame-ancestors 'self'; base-uri 'none'; form-action 'none'"
)
_STATIC_DIR = Path(__file__).parent / "static"
_STATIC = {path.name: path.read_bytes() for path in _STATIC_DIR.iterdir() if path.is_file()}
# The addresses the templates ask for by name (templates/inbox/*.html).
_URLS = {
    "inbox.index": PREFIX + "/",
    "inbox.events": PREFIX + "/events",
    "inbox.static": PREFIX + "/static/{filename}",
    "inbox.ui_open": PREFIX + "/ui/open",
    "inbox.ui_scope": PREFIX + "/ui/scopes/{scope}",
    "inbox.ui_message": PREFIX + "/ui/scopes/{scope}/messages/{message_id}",
    "inbox.ui_message_html": PREFIX + "/ui/scopes/{scope}/messages/{message_id}/html",
    "inbox.get_raw_message": PREFIX + "/scopes/{scope}/messages/{message_id}/raw",
    "pages.favicon": "/favicon.svg",  # the web app's icon, one for the pages and the inbox
}
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}


def url_for(name: str, **values: object) -> str:
    """The path of a named inbox address, each value quoted as one path segment."""
    return _URLS[name].format(**{k: quote(str(v), safe="") for k, v in values.items()})


def _templates() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        autoescape=jinja2.select_autoescape(["html"]),
    )
    environment.globals["url_for"] = url_for
    return environment


class _BadRequestLines(logging.Filter):
    """aiohttp's line about a malformed request quotes it whole, query string and all."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            record.msg, record.args = "front_bad_request", ()
            record.error = type(exc).__name__
            record.exc_info, record.exc_text = None, None
        return True


_SERVER_LOG_FILTERS = (_BadRequestLines(), QueryStringFilter())

_aiohttp_handle_error = RequestHandler.handle_error


def _problem_for_unreadable_request(
    handler: RequestHandler, request: Any, status: int = 500,
    exc: BaseException | None = None, message: str | None = None,
) -> web.StreamResponse:
    """aiohttp answers a request it cannot parse (a bad request line, an oversized
    header, a broken Content-Length) itself, as text/plain quoting the line, query
    string and all. This server's handlers answer it as problem+json instead, like
    every other error of /api/v1 and /_inbox, with a generic detail; aiohttp
    still logs it (through the filters above) and closes the connection."""
    _aiohttp_handle_error(handler, request, status, exc, message)
    code = "internal_error" if status >= 500 else "invalid_request"
    title = "Internal server error" if status >= 500 else "Bad request"
    response = problem_response(status, code, title, UNREADABLE_REQUEST_DETAIL)
    response.headers["Cache-Control"] = "no-store"
    response.force_close()
    return response


def answer_unreadable_requests_with_problems() -> None:
    """Install the answer above on aiohttp's request handler (idempotent)."""
    # Same signature as aiohttp's method; mypy cannot see a function assigned onto a class.
    RequestHandler.handle_error = _problem_for_unreadable_request  # type: ignore[method-assign,assignment]


def _inside(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


def _speaks_problems(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in PROBLEM_PATHS)


def _json(body: Any, status: int = 200, *, problem: bool = False) -> web.Response:
    content_type = "application/problem+json" if problem else "application/json"
    return web.Response(status=status, text=json.dumps(body), content_type=content_type)


_problem = problem_response


def _too_large(request: web.Request) -> web.Response:
    """A body this server will not buffer; it stays unread, so the connection closes."""
    detail = f"The body is larger than {MAX_BODY_BYTES} bytes."
    if _speaks_problems(request.path):
        response = _problem(413, "payload_too_large", TOO_LARGE_TITLE, detail)
    else:
        response = web.Response(status=413, text=detail + "\n")
    response.force_close()
    return response


def _http_problem(exc: web.HTTPException) -> web.Response:
    """aiohttp's routing answers (404, 405) as the inbox's problems."""
    code = _HTTP_CODES.get(exc.status, exc.reason.lower().replace(" ", "_"))
    detail = {404: "No such inbox address.", 405: f"{exc.reason}."}.get(exc.status, exc.reason)
    response = _problem(exc.status, code, exc.reason, detail)
    if isinstance(exc, web.HTTPMethodNotAllowed):
        response.headers["Allow"] = ", ".join(sorted(exc.allowed_methods))
    return response


def _unauthorized() -> web.Response:
    response = _problem(401, "unauthorized", "Unauthorized", UNAUTHORIZED_DETAIL)
    response.headers["WWW-Authenticate"] = CHALLENGE
    return response


def _scope_or_404(raw: str) -> str:
    try:
        return params.scope(raw)
    except BadRequest:
        raise web.HTTPNotFound() from None


class InboxServer:
    """Serves /_inbox (and, given an upstream, forwards everything else to it)."""

    def __init__(
        self, svc: Services, *, listen_url: str | None, host: str = "127.0.0.1",
        port: int = 8000, upstream: str | None = None, pool_size: int = DEFAULT_POOL_SIZE,
    ) -> None:
        """`svc.pool` holds the connections for the short queries (at least `pool_size`)."""
        self.svc = svc
        self.host, self.port = host, port
        self.watcher = AsyncScopeWatcher(listen_url)
        self.upstream = Upstream(upstream) if upstream else None
        self._executor = ThreadPoolExecutor(pool_size, thread_name_prefix="inbox-http")
        self._templates = _templates()
        self._runner: web.AppRunner | None = None
        self.app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[self._door])
        self.app.on_response_prepare.append(self._headers)
        routes: list[tuple[str, str, Handler]] = [
            ("POST", "/scopes", self.create_scope),
            ("GET", "/scopes", self.list_scopes),
            ("GET", "/scopes/{scope}/messages", self.list_messages),
            ("GET", "/scopes/{scope}/expect-one", self.expect_one),
            ("GET", r"/scopes/{scope}/messages/{message_id:\d+}", self.get_message),
            ("GET", r"/scopes/{scope}/messages/{message_id:\d+}/raw", self.get_raw_message),
            ("DELETE", "/scopes/{scope}", self.delete_scope),
            ("GET", "/openapi.json", self.openapi),
            ("GET", "/waiting", self.waiting),
            ("GET", "/", self.index),
            ("GET", "/events", self.events),
            ("GET", "/static/{filename}", self.static),
            ("GET", "/ui/open", self.open_scope),
            ("GET", "/ui/scopes/{scope}", self.scope_page),
            ("GET", r"/ui/scopes/{scope}/messages/{message_id:\d+}", self.message_page),
            ("GET", r"/ui/scopes/{scope}/messages/{message_id:\d+}/html", self.message_html),
        ]
        resources: dict[str, web.Resource] = {}
        for method, path, handler in routes:
            resource = resources.get(path) or self.app.router.add_resource(PREFIX + path)
            resources[path] = resource
            resource.add_route(method, handler)
            if method == "GET" and handler != self.events:  # a stream has no end to HEAD
                resource.add_route("HEAD", handler)

    # -- life cycle --------------------------------------------------------

    async def start(self) -> None:
        """Start listening for news, then for requests on host:port (on the serving loop)."""
        self.watcher.start()
        if self.upstream is not None:
            await self.upstream.open()
        answer_unreadable_requests_with_problems()
        server_log = logging.getLogger("aiohttp.server")
        for log_filter in _SERVER_LOG_FILTERS:
            server_log.addFilter(log_filter)  # idempotent: the same instances
        # No access log: query strings carry tokens (`?token=`), as in `authsvc serve`.
        self._runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=2)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=2048)
        await site.start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            # Let the handlers cancelled by cleanup (parked polls, event streams) unwind.
            for _ in range(3):
                await asyncio.sleep(0)
        if self.upstream is not None:
            await self.upstream.close()
        await self.watcher.stop()
        self._executor.shutdown(wait=False, cancel_futures=True)

    # -- what every request goes through ----------------------------------

    @web.middleware
    async def _door(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Body limit, forwarding, the bearer token, and errors as problems; never a traceback."""
        try:
            return await self._through(request, handler)
        except (asyncio.CancelledError, ConnectionResetError):
            raise
        except Exception as exc:
            log.error("inbox_http_internal_error", exc_info=exc, extra={"path": request.path})
            return _problem(500, "internal_error", "Internal error", "Something went wrong.")

    async def _through(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            body = await request.read() if request.body_exists else None
        except web.HTTPRequestEntityTooLarge:
            return _too_large(request)
        if not _inside(request.path):
            if self.upstream is None:
                return web.Response(status=404, text="Not found: this server is the test inbox.\n")
            return await self.upstream.forward(request, body)
        if request.path == PREFIX:
            # By path alone: a Location built from the Host header would send
            # the browser wherever the client said.
            query = f"?{request.query_string}" if request.query_string else ""
            return web.Response(status=308, headers={"Location": f"{PREFIX}/{query}"})
        if not token_accepted(self.svc.settings.test_inbox_token,
                              request.headers.get("Authorization", "")):
            return _unauthorized()
        try:
            return await handler(request)
        except BadRequest as exc:
            return _problem(400, "invalid_request", "Bad request", exc.detail)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            return _http_problem(exc)
        except psycopg.OperationalError as exc:
            log_event(log, "database_unavailable", path=request.path, error=type(exc).__name__)
            detail = "The database is unavailable; retry shortly."
            response = _problem(503, "service_unavailable", "Service unavailable", detail)
            response.headers["Retry-After"] = "2"
            return response

    async def _headers(self, request: web.Request, response: web.StreamResponse) -> None:
        if not _inside(request.path):
            return  # forwarded answers carry the web app's own headers
        # Messages carry links with live tokens, scope names are capabilities:
        # no browser or proxy cache may keep an answer.
        response.headers["Cache-Control"] = "no-store"
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)

    async def _db(self, query: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run one query of authsvc.inbox.messages on a pooled connection, off the loop."""

        def run() -> T:
            with self.svc.pool.connection() as conn:
                return query(conn, *args, **kwargs)

        return await asyncio.get_running_loop().run_in_executor(self._executor, run)

    # -- the API (authsvc.inbox.openapi describes it) ----------------------

    async def create_scope(self, request: web.Request) -> web.StreamResponse:
        """A fresh, unguessable scope and the address that delivers into it."""
        scope = new_scope_name()
        address = f"{scope}@{self.svc.settings.test_inbox_domain}"
        return _json({"scope": scope, "address": address}, 201)

    async def list_scopes(self, request: web.Request) -> web.StreamResponse:
        """The most recently written scopes, newest first."""
        limit = params.integer(request.query, "limit", 50, 500, minimum=1)
        found = await self._db(messages.list_scopes, limit)
        return _json({"scopes": [s.as_json() for s in found]})

    def _scan(self, scope: str, since: int, filters: params.Filters) -> Awaitable[list[Seen]]:
        # A connection per check, never held across the wait.
        return self._db(messages.scan_scope, scope, since=since, filters=filters)

    async def list_messages(self, request: web.Request) -> web.StreamResponse:
        """Messages of a scope, oldest first, waiting up to `wait` seconds for `min` of them."""
        query = params.list_query(request.match_info["scope"], request.query)
        await self.watcher.wait_until(
            query.scope, partial(self._scan, query.scope, query.since, query.filters),
            lambda seen: len(seen) >= query.minimum, query.wait,
        )
        page = await self._db(
            messages.list_messages, query.scope, since=query.since, filters=query.filters,
            limit=query.limit, bodies=query.bodies,
        )
        return _json(page.as_json(query.since))

    async def expect_one(self, request: web.Request) -> web.StreamResponse:
        """200 for exactly one message, 409 for more (with duplicate groups), 408 for none."""
        query = params.expect_query(request.match_info["scope"], request.query)
        scan = partial(self._scan, query.scope, query.since, query.filters)
        seen = await self.watcher.wait_until(
            query.scope, scan, lambda found: len(found) >= 1, query.timeout
        )
        remaining = settle_left(query, seen)
        if remaining > 0:
            seen = await self.watcher.wait_until(
                query.scope, scan, lambda found: len(found) >= 2, remaining
            )
        page = await self._db(
            messages.list_messages, query.scope, since=query.since, filters=query.filters,
            limit=params.MAX_LISTED, bodies=True,
        )
        status, body = expect_one_answer(query, seen, page)
        return _json(body, status, problem=status == 408)

    async def get_message(self, request: web.Request) -> web.StreamResponse:
        scope = params.scope(request.match_info["scope"])
        message_id = int(request.match_info["message_id"])
        found = await self._db(messages.get_message, scope, message_id)
        if found is None:
            return _problem(404, "not_found", "Not found", f"no message {message_id} in this scope")
        return _json({"message": found.as_json()})

    async def get_raw_message(self, request: web.Request) -> web.StreamResponse:
        scope = params.scope(request.match_info["scope"])
        message_id = int(request.match_info["message_id"])
        raw = await self._db(messages.get_raw_message, scope, message_id)
        if raw is None:
            return _problem(404, "not_found", "Not found", f"no message {message_id} in this scope")
        return web.Response(body=raw, content_type="message/rfc822")

    async def delete_scope(self, request: web.Request) -> web.StreamResponse:
        """Empties the scope; later mail still lands in it."""
        await self._db(messages.delete_scope, params.scope(request.match_info["scope"]))
        return web.Response(status=204)

    async def openapi(self, request: web.Request) -> web.StreamResponse:
        """The OpenAPI document of /_inbox."""
        return _json(openapi_document())

    async def waiting(self, request: web.Request) -> web.StreamResponse:
        """How many requests this process holds parked (for the scale test and the bench)."""
        return _json({"waiting": self.watcher.waiting})

    # -- the pages ---------------------------------------------------------

    def _page(self, template: str, status: int = 200, **context: object) -> web.Response:
        html = self._templates.get_template(template).render(**context)
        response = web.Response(status=status, text=html, content_type="text/html")
        response.headers["Content-Security-Policy"] = UI_POLICY
        return response

    async def index(self, request: web.Request) -> web.StreamResponse:
        """Recent scopes; live.js keeps the table current from /_inbox/events."""
        scopes = await self._db(messages.list_scopes)
        return self._page("inbox/index.html", scopes=scopes,
                          domain=self.svc.settings.test_inbox_domain)

    async def open_scope(self, request: web.Request) -> web.StreamResponse:
        """The 'open a scope' form: a GET with ?scope=."""
        raw = request.query.get("scope", "")
        try:
            scope = params.scope(raw)
        except BadRequest as exc:
            scopes = await self._db(messages.list_scopes)
            return self._page(
                "inbox/index.html", 400, scopes=scopes, error=exc.detail, typed=raw,
                domain=self.svc.settings.test_inbox_domain,
            )
        location = url_for("inbox.ui_scope", scope=scope)
        return web.Response(status=302, headers={"Location": location})

    async def scope_page(self, request: web.Request) -> web.StreamResponse:
        """A scope's messages, newest first, re-sends of one job marked; filterable."""
        scope = _scope_or_404(request.match_info["scope"])
        filters = params.filters(request.query)
        page = await self._db(messages.list_messages, scope, filters=filters, bodies=False)
        resent: dict[int, int] = {}
        for group in messages.duplicate_groups(page.messages):
            for inbox_id in group[1:]:
                resent[inbox_id] = group[0]
        return self._page(
            "inbox/scope.html", scope=scope, messages=list(reversed(page.messages)),
            more=page.more, resent=resent, filters=filters,
        )

    async def message_page(self, request: web.Request) -> web.StreamResponse:
        """One message: framed HTML, text, headers, raw source, the code and each link's state."""
        scope = _scope_or_404(request.match_info["scope"])
        message_id = int(request.match_info["message_id"])

        def read(conn: Connection) -> tuple[messages.InboxMessage, list[link_states.LinkState]]:
            found = messages.get_message(conn, scope, message_id)
            if found is None:
                raise web.HTTPNotFound()
            return found, [link_states.link_state(conn, self.svc, url) for url in found.links]

        found, links = await self._db(read)
        return self._page(
            "inbox/message.html", scope=scope, message=found, links=links,
            code=link_states.find_code(found.text_body),
            received=format_datetime(found.received_at),
        )

    async def message_html(self, request: web.Request) -> web.StreamResponse:
        """The email's HTML part, for the sandboxed frame only."""
        scope = _scope_or_404(request.match_info["scope"])
        found = await self._db(messages.get_message, scope, int(request.match_info["message_id"]))
        if found is None or found.html_body is None:
            raise web.HTTPNotFound()
        response = web.Response(text=found.html_body, content_type="text/html")
        response.headers["Content-Security-Policy"] = EMAIL_POLICY
        response.headers["X-Frame-Options"] = "SAMEORIGIN"
        return response

    async def static(self, request: web.Request) -> web.StreamResponse:
        """The UI's stylesheet and script (the only files it loads besides the icon)."""
        name = request.match_info["filename"]
        if name not in _STATIC:
            raise web.HTTPNotFound()
        content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
        return web.Response(body=_STATIC[name], content_type=content_type)

    async def events(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: the recent scopes now, then again whenever they change.

        On a database error the stream ends rather than answering 503: a 503
        can no longer be sent once the stream has begun, and EventSource gives
        up for good on a non-200 answer but reconnects (after `retry`) when a
        stream ends.
        """
        loop = asyncio.get_running_loop()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            await response.write(f"retry: {EVENTS_RETRY_MS}\n\n".encode())
            shown, written_at = "", loop.time()
            while True:
                scopes = await self._db(messages.list_scopes)
                data = json.dumps({"scopes": [s.as_json() for s in scopes]})
                if data != shown:  # news may be a poll's turn or a reconnect: push only changes
                    await response.write(f"event: scopes\ndata: {data}\n\n".encode())
                    shown, written_at = data, loop.time()
                while True:
                    quiet_for = EVENTS_HEARTBEAT_SECONDS - (loop.time() - written_at)
                    if quiet_for <= 0:
                        await response.write(b": still here\n\n")
                        written_at = loop.time()
                    elif await self.watcher.any_news(quiet_for):
                        break
                await asyncio.sleep(EVENTS_DEBOUNCE_SECONDS)  # one update for a burst of mail
        except ConnectionResetError:
            pass  # the browser went away
        except psycopg.Error as exc:
            log_event(log, "database_unavailable", path=request.path, error=type(exc).__name__)
            with suppress(ConnectionResetError):
                await response.write_eof()
        return response
