"""The inbox's asyncio front: serves the long polls and live events itself, proxies the rest.

Under `authsvc dev` this server owns the public port. A long poll
(`…/messages`, `…/expect-one`) or the UI's event stream is a coroutine parked
on one LISTEN connection, so a thousand of them cost no thread; every other
request is streamed to the gunicorn app behind it unchanged. The answers are
decided by the same code as the Flask views (authsvc.inbox.params, .answers,
.messages), so both behave alike.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from psycopg_pool import AsyncConnectionPool

from authsvc.db import POOLER_SAFE
from authsvc.inbox import async_store, params
from authsvc.inbox.access import CHALLENGE, UNAUTHORIZED_DETAIL, token_accepted
from authsvc.inbox.answers import expect_one_answer, settle_left
from authsvc.inbox.coroutine_waiters import AsyncScopeWatcher
from authsvc.inbox.messages import Seen
from authsvc.inbox.params import BadRequest
from authsvc.log_redaction import QueryStringFilter
from authsvc.logs import log_event
from authsvc.problem_documents import problem_document

log = logging.getLogger("authsvc.inbox.front")

# Hop-by-hop headers (RFC 9110 §7.6.1) are the proxy's own business.
_HOP_BY_HOP = frozenset(
    h.lower()
    for h in (
        "Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "TE",
        "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length",
    )
)
EVENTS_HEARTBEAT_SECONDS = 15.0
EVENTS_DEBOUNCE_SECONDS = 0.2
EVENTS_RETRY_MS = 2000
MAX_PROXIED_BODY = 1024 * 1024
CHUNK = 64 * 1024
# Paths whose errors are problem documents (SPEC §5, §8): the front's own
# refusals there speak the same format as the app behind it.
PROBLEM_PATHS = ("/api/v1", "/_inbox", "/webhooks/provider")
TOO_LARGE_TITLE = "The request body is too large"  # as authsvc.api.problems says it
# Below gunicorn's keep-alive (2 s): the front never picks a pooled connection
# gunicorn is about to close.
UPSTREAM_KEEPALIVE_SECONDS = 1.0
# Safe to send again when gunicorn dropped a reused connection before answering.
RETRIED_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


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


@dataclass
class FrontConfig:
    upstream: str
    database_url: str
    token: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    pool_size: int = 8
    # The direct URL for LISTEN (AUTHSVC_DIRECT_DATABASE_URL); None: poll instead.
    listen_url: str | None = None


def _json(status: int, body: Any, *, problem: bool = False) -> web.Response:
    content_type = "application/problem+json" if problem else "application/json"
    response = web.Response(status=status, text=json.dumps(body), content_type=content_type)
    # Inbox answers carry links with live tokens: no cache may keep them.
    response.headers["Cache-Control"] = "no-store"
    return response


def _speaks_problems(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in PROBLEM_PATHS)


def _too_large(request: web.Request) -> web.Response:
    """The front's refusal of a body it will not buffer; the body is unread, so it closes."""
    detail = f"The body is larger than {MAX_PROXIED_BODY} bytes."
    if _speaks_problems(request.path):
        body = problem_document(413, "payload_too_large", TOO_LARGE_TITLE, detail)
        response = _json(413, body, problem=True)
    else:
        response = web.Response(status=413, text=detail + "\n")
    response.force_close()
    return response


def _wire_header(value: str) -> str:
    """A received header value as aiohttp can send it on.

    aiohttp reads bytes that are not UTF-8 as surrogate escapes, which it cannot
    encode again; such a value goes on as its Latin-1 reading (what a WSGI app
    is given for those bytes) rather than failing the request.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogateescape").decode("latin-1")
    return value


@web.middleware
async def _no_tracebacks(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """An unexpected error is a logged event and a problem, never aiohttp's text page."""
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except (asyncio.CancelledError, ConnectionResetError):
        raise
    except Exception as exc:
        log.error("front_internal_error", exc_info=exc, extra={"path": request.path})
        body = problem_document(500, "internal_error", "Internal error", "Something went wrong.")
        return _json(500, body, problem=True)


def _bad_request(exc: BadRequest) -> web.Response:
    body = problem_document(400, "invalid_request", "Bad request", exc.detail)
    return _json(400, body, problem=True)


class InboxFront:
    """The aiohttp server: long polls, the UI's events, and a proxy to the web app."""

    def __init__(self, config: FrontConfig) -> None:
        self.config = config
        self.pool = AsyncConnectionPool(
            config.database_url, min_size=1, max_size=config.pool_size, open=False,
            name="authsvc-inbox-front", kwargs=dict(POOLER_SAFE),
        )
        self.watcher = AsyncScopeWatcher(config.listen_url)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.app = web.Application(client_max_size=MAX_PROXIED_BODY, middlewares=[_no_tracebacks])
        self.app.router.add_get("/_inbox/scopes/{scope}/messages", self._guard(self.messages))
        self.app.router.add_get("/_inbox/scopes/{scope}/expect-one", self._guard(self.expect_one))
        self.app.router.add_get("/_inbox/events", self._guard(self.events))
        self.app.router.add_get("/_inbox/front", self._guard(self.status))
        self.app.router.add_route("*", "/{tail:.*}", self.proxy)

    async def start(self) -> None:
        """Open the pool and the LISTEN connection, then listen on host:port."""
        await self.pool.open(wait=True, timeout=10)
        self.watcher.start()
        server_log = logging.getLogger("aiohttp.server")
        for log_filter in _SERVER_LOG_FILTERS:
            server_log.addFilter(log_filter)  # idempotent: the same instances
        self._session = aiohttp.ClientSession(
            auto_decompress=False,
            connector=aiohttp.TCPConnector(
                limit=64, keepalive_timeout=UPSTREAM_KEEPALIVE_SECONDS
            ),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=5),
        )
        # No access log: query strings carry tokens (`?token=`), as in `authsvc serve`.
        self._runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=2)
        await self._runner.setup()
        site = web.TCPSite(
            self._runner, self.config.host, self.config.port, backlog=2048
        )
        await site.start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            # Let the handlers cancelled by cleanup (parked polls, event streams) unwind.
            for _ in range(3):
                await asyncio.sleep(0)
        if self._session is not None:
            await self._session.close()
        await self.watcher.stop()
        await self.pool.close()

    def _guard(
        self, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def guarded(request: web.Request) -> web.StreamResponse:
            refused = self._refuse_without_token(request)
            if refused is not None:
                return refused
            try:
                return await handler(request)
            except BadRequest as exc:
                return _bad_request(exc)

        return guarded

    def _refuse_without_token(self, request: web.Request) -> web.Response | None:
        if token_accepted(self.config.token, request.headers.get("Authorization", "")):
            return None
        body = problem_document(401, "unauthorized", "Unauthorized", UNAUTHORIZED_DETAIL)
        response = _json(401, body, problem=True)
        response.headers["WWW-Authenticate"] = CHALLENGE
        return response

    async def status(self, request: web.Request) -> web.StreamResponse:
        """How many requests this front holds parked (only the front answers this)."""
        return _json(200, {"waiting": self.watcher.waiting})

    async def messages(self, request: web.Request) -> web.StreamResponse:
        query = params.list_query(request.match_info["scope"], request.query)

        async def scan() -> list[Seen]:
            return await async_store.scan_scope(self.pool, query.scope, query.since, query.filters)

        await self.watcher.wait_until(
            query.scope, scan, lambda seen: len(seen) >= query.minimum, query.wait
        )
        page = await async_store.list_messages(
            self.pool, query.scope, since=query.since, filters=query.filters,
            limit=query.limit, bodies=query.bodies,
        )
        return _json(200, page.as_json(query.since))

    async def expect_one(self, request: web.Request) -> web.StreamResponse:
        query = params.expect_query(request.match_info["scope"], request.query)

        async def scan() -> list[Seen]:
            return await async_store.scan_scope(self.pool, query.scope, query.since, query.filters)

        seen = await self.watcher.wait_until(
            query.scope, scan, lambda found: len(found) >= 1, query.timeout
        )
        remaining = settle_left(query, seen)
        if remaining > 0:
            seen = await self.watcher.wait_until(
                query.scope, scan, lambda found: len(found) >= 2, remaining
            )
        page = await async_store.list_messages(
            self.pool, query.scope, since=query.since, filters=query.filters,
            limit=params.MAX_LISTED, bodies=True,
        )
        status, body = expect_one_answer(query, seen, page)
        return _json(status, body, problem=status == 408)

    async def events(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: the recent scopes now, then again whenever mail lands."""
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
        )
        await response.prepare(request)
        try:
            await response.write(f"retry: {EVENTS_RETRY_MS}\n\n".encode())
            while True:
                scopes = await async_store.list_scopes(self.pool)
                data = json.dumps({"scopes": [s.as_json() for s in scopes]})
                await response.write(f"event: scopes\ndata: {data}\n\n".encode())
                while not await self.watcher.any_news(EVENTS_HEARTBEAT_SECONDS):
                    await response.write(b": still here\n\n")
                await asyncio.sleep(EVENTS_DEBOUNCE_SECONDS)  # one update for a burst of mail
        except ConnectionResetError:
            pass  # the browser went away
        return response

    async def proxy(self, request: web.Request) -> web.StreamResponse:
        """Stream the request to the web app and its answer back, byte for byte."""
        assert self._session is not None
        target = request.raw_path
        if not target.startswith("/"):
            # Absolute form (`GET http://host/path`): only its path and query go on.
            target = request.rel_url.raw_path_qs
        if not target.startswith("/"):
            return _json(400, problem_document(
                400, "invalid_request", "Bad request", "The request target must be a path."
            ), problem=True)
        headers = [
            (k, _wire_header(v)) for k, v in request.headers.items()
            if k.lower() not in _HOP_BY_HOP
        ]
        peer = request.remote or ""
        forwarded = request.headers.get("X-Forwarded-For")
        headers.append(
            ("X-Forwarded-For", _wire_header(f"{forwarded}, {peer}" if forwarded else peer))
        )
        try:
            body = await request.read() if request.body_exists else None
        except web.HTTPRequestEntityTooLarge:
            return _too_large(request)
        attempts = 2 if request.method in RETRIED_METHODS else 1
        for attempt in range(1, attempts + 1):
            try:
                return await self._forward(request, target, headers, body)
            except aiohttp.ServerDisconnectedError:
                if attempt < attempts:
                    continue  # a kept-alive connection gunicorn had just closed
                failure = "ServerDisconnectedError"
            except aiohttp.ClientError as exc:
                failure = type(exc).__name__
            break
        # The upstream's address and the URL stay in the log, not in the answer.
        log_event(log, "front_upstream_failed", logging.WARNING, method=request.method,
                  path=request.path, error=failure)
        detail = "The web app did not answer; retry shortly."
        return _json(502, problem_document(502, "bad_gateway", "Bad gateway", detail), problem=True)

    async def _forward(
        self, request: web.Request, target: str, headers: list[tuple[str, str]],
        body: bytes | None,
    ) -> web.StreamResponse:
        assert self._session is not None
        async with self._session.request(
            request.method, self.config.upstream + target, headers=headers,
            data=body, allow_redirects=False,
        ) as upstream:
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for name, value in upstream.headers.items():
                if name.lower() not in _HOP_BY_HOP:
                    response.headers.add(name, value)
            if upstream.content_length is not None:
                response.content_length = upstream.content_length
            await response.prepare(request)
            try:
                async for chunk in upstream.content.iter_chunked(CHUNK):
                    await response.write(chunk)
                await response.write_eof()
            except ConnectionResetError:
                pass  # the client went away (aiohttp's ClientConnectionResetError too)
            except aiohttp.ClientError as exc:
                # Half an answer is out, so no 502 can follow and no retry: cut the
                # client's connection, so that it sees a broken answer, not a short one.
                log_event(log, "front_upstream_failed", logging.WARNING,
                          method=request.method, path=request.path, error=type(exc).__name__)
                if request.transport is not None:
                    request.transport.close()
            return response
