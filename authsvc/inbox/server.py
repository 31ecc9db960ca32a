"""The test inbox's one HTTP server (aiohttp): every /_inbox answer, API, pages and live events.

The API's handlers are here, the pages' (and the event streams') in
authsvc.inbox.pages; both go through this server's door (body limit, the
bearer token, errors as problems) and its pool of short queries.

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
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

import psycopg
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler

from authsvc.inbox import faults, link_states, messages, params, search
from authsvc.inbox.access import CHALLENGE, UNAUTHORIZED_DETAIL, token_accepted
from authsvc.inbox.answers import expect_one_answer, settle_left
from authsvc.inbox.messages import Seen
from authsvc.inbox.openapi import openapi_document
from authsvc.inbox.pages import FORBIDDEN_DETAIL, Pages
from authsvc.inbox.params import BadRequest
from authsvc.inbox.proxy import Upstream, problem_response
from authsvc.inbox.scopes import new_scope_name
from authsvc.inbox.waiters import AsyncScopeWatcher
from authsvc.observability.log_redaction import QueryStringFilter
from authsvc.observability.logs import log_event
from authsvc.problem_documents import NOT_JSON_DETAIL, UNREADABLE_REQUEST_DETAIL, declares_json
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
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}


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


def _search_timed_out() -> web.Response:
    return _problem(503, "search_timeout", "Search timed out", search.TIMEOUT_ADVICE)


def _search_busy() -> web.Response:
    response = _problem(503, "search_busy", "Too many searches", search.BUSY_ADVICE)
    response.headers["Retry-After"] = search.BUSY_RETRY_AFTER
    return response


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
        self._search_slots = asyncio.Semaphore(search.SLOTS)
        self.log = log
        self.pages = Pages(self)
        self._runner: web.AppRunner | None = None
        self.app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[self._door])
        self.app.on_response_prepare.append(self._headers)
        self.app.on_shutdown.append(self._end_event_streams)
        # Every route under /_inbox, the JSON API's and the pages', in one table.
        routes: list[tuple[str, str, Handler]] = [
            ("POST", "/scopes", self.create_scope),
            ("GET", "/scopes", self.list_scopes),
            ("GET", "/scopes/{scope}/messages", self.list_messages),
            ("GET", "/scopes/{scope}/expect-one", self.expect_one),
            ("GET", r"/scopes/{scope}/messages/{message_id:\d+}", self.get_message),
            ("GET", r"/scopes/{scope}/messages/{message_id:\d+}/raw", self.get_raw_message),
            ("DELETE", "/scopes/{scope}", self.delete_scope),
            ("DELETE", r"/scopes/{scope}/messages/{message_id:\d+}", self.delete_message),
            ("POST", "/scopes/{scope}/faults", self.set_fault),
            ("DELETE", "/scopes/{scope}/faults", self.clear_faults),
            ("GET", "/search", self.search_messages),
            ("GET", "/openapi.json", self.openapi),
            ("GET", "/waiting", self.waiting),
            # The web UI's pages (pages.py), under the same prefix and the same door.
            ("GET", "/", self.pages.index),
            ("GET", "/events", self.pages.events),
            ("GET", "/static/{filename}", self.pages.static),
            ("GET", "/favicon.svg", self.pages.favicon),
            ("GET", "/ui/open", self.pages.open_scope),
            ("GET", "/ui/search", self.pages.search_page),
            ("GET", "/ui/scopes/{scope}", self.pages.scope_page),
            ("POST", "/ui/scopes/{scope}/delete", self.pages.delete_scope),
            ("GET", r"/ui/scopes/{scope}/messages/{message_id:\d+}", self.pages.message_page),
            ("GET", r"/ui/scopes/{scope}/messages/{message_id:\d+}/html",
             self.pages.message_html),
            ("POST", r"/ui/scopes/{scope}/messages/{message_id:\d+}/delete",
             self.pages.delete_message),
        ]
        resources: dict[str, web.Resource] = {}
        for method, path, handler in routes:
            resource = resources.get(path) or self.app.router.add_resource(PREFIX + path)
            resources[path] = resource
            resource.add_route(method, handler)
            if method == "GET" and handler != self.pages.events:  # a stream has no end to HEAD
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

    async def _end_event_streams(self, _app: web.Application) -> None:
        # Before the shutdown waits on open requests: a stream would otherwise hold it for
        # its whole grace and then be cut off mid-stream.
        self.watcher.close()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            # Let the handlers cancelled by cleanup (parked polls, a stream stuck on a
            # write) unwind.
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
            link_states.listing, self.svc, query.scope, since=query.since, filters=query.filters,
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
            link_states.listing, self.svc, query.scope, since=query.since, filters=query.filters,
            limit=params.MAX_LISTED, bodies=True,
        )
        status, body = expect_one_answer(query, seen, page)
        return _json(body, status, problem=status == 408)

    async def get_message(self, request: web.Request) -> web.StreamResponse:
        scope = params.scope(request.match_info["scope"])
        message_id = int(request.match_info["message_id"])
        found = await self._db(link_states.message, self.svc, scope, message_id)
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

    async def delete_message(self, request: web.Request) -> web.StreamResponse:
        """Deletes one message of the scope."""
        scope = params.scope(request.match_info["scope"])
        message_id = int(request.match_info["message_id"])
        if not await self._db(messages.delete_message, scope, message_id):
            return _problem(404, "not_found", "Not found", f"no message {message_id} in this scope")
        return web.Response(status=204)

    async def set_fault(self, request: web.Request) -> web.StreamResponse:
        """The scope's next `count` deliveries get `reply` from the SMTP sink."""
        scope = params.scope(request.match_info["scope"])
        if not declares_json(request.content_type):  # another site's form or text/plain
            return _problem(415, "unsupported_media_type", "Unsupported media type",
                            NOT_JSON_DETAIL)
        reply, count = faults.parse_fault(await request.read())
        fault = await self._db(faults.set_fault, scope, reply, count)
        return _json(fault.as_json(), 201)

    async def clear_faults(self, request: web.Request) -> web.StreamResponse:
        """The scope's deliveries are stored again."""
        await self._db(faults.clear_faults, params.scope(request.match_info["scope"]))
        return web.Response(status=204)

    async def search_messages(self, request: web.Request) -> web.StreamResponse:
        """Messages of every scope matching `q`, newest first, paged by `older_than`."""
        raw, query, limit, older_than = self.search_request(request)
        try:
            page = await self.searched(query, limit, older_than)
        except search.SearchBusy:
            return _search_busy()
        except psycopg.errors.QueryCanceled:
            return _search_timed_out()
        return _json(page.as_json(raw))

    async def searched(
        self, query: search.SearchQuery, limit: int, older_than: int
    ) -> search.SearchPage:
        """One search (the API's and the UI's) in one of search.SLOTS; search.SearchBusy when
        none frees up within search.QUEUE_SECONDS."""
        try:
            async with asyncio.timeout(search.QUEUE_SECONDS):
                await self._search_slots.acquire()
        except TimeoutError:
            raise search.SearchBusy() from None
        running = asyncio.ensure_future(
            self._db(link_states.searched, self.svc, query, limit, older_than))
        running.add_done_callback(self._free_search_slot)
        # Shielded: a client that hangs up does not free the slot while its query still
        # holds a thread; the slot frees when the query ends.
        return await asyncio.shield(running)

    def _free_search_slot(self, done: asyncio.Future[Any]) -> None:
        self._search_slots.release()
        if not done.cancelled():
            done.exception()  # retrieved: a hung-up client's failed search is not an error

    @staticmethod
    def search_request(request: web.Request) -> tuple[str, search.SearchQuery, int, int]:
        raw = request.query.get("q", "")
        query = search.parse_query(raw)
        limit = params.integer(request.query, "limit", search.DEFAULT_PAGE, search.MAX_PAGE,
                               minimum=1)
        older_than = params.integer(request.query, "older_than", params.MAX_ID, params.MAX_ID,
                                    minimum=1)
        return raw, query, limit, older_than

    @staticmethod
    def forbidden() -> web.Response:
        """A UI form post without this service's token for it (another site's, or stale)."""
        return _problem(403, "forbidden", "Forbidden", FORBIDDEN_DETAIL)

    async def openapi(self, request: web.Request) -> web.StreamResponse:
        """The OpenAPI document of /_inbox."""
        return _json(openapi_document())

    async def waiting(self, request: web.Request) -> web.StreamResponse:
        """How many requests this process holds parked (for the scale test and the bench)."""
        return _json({"waiting": self.watcher.waiting})
