"""The inbox server's forwarding of every path it does not own to the web app (`authsvc dev`).

Under `authsvc dev` the inbox's HTTP server owns the public port, so that a
long poll is a parked coroutine rather than a gunicorn thread; everything
outside /_inbox (pages, the JSON API, probes) goes on to gunicorn unchanged
and its answer comes back byte for byte.
"""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
from aiohttp import web
from yarl import URL

from authsvc.observability.logs import log_event
from authsvc.problem_documents import problem_document

log = logging.getLogger(__name__)

# Hop-by-hop headers (RFC 9110 §7.6.1) are the proxy's own business.
_HOP_BY_HOP = frozenset(
    h.lower()
    for h in (
        "Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "TE",
        "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length",
    )
)
CHUNK = 64 * 1024
# Below gunicorn's keep-alive (2 s): never pick a pooled connection gunicorn is about to close.
UPSTREAM_KEEPALIVE_SECONDS = 1.0
# Safe to send again when gunicorn dropped a reused connection before answering.
RETRIED_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def problem_response(
    status: int, code: str, title: str, detail: str, **extra: Any
) -> web.Response:
    """A problem+json answer, the format of the JSON API and the inbox."""
    return web.json_response(
        problem_document(status, code, title, detail, **extra), status=status,
        content_type="application/problem+json",
    )


def wire_header(value: str) -> str:
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


class Upstream:
    """The web app behind the inbox server, reached over kept-alive connections."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self._session: aiohttp.ClientSession | None = None

    async def open(self) -> None:
        self._session = aiohttp.ClientSession(
            auto_decompress=False,
            connector=aiohttp.TCPConnector(limit=64, keepalive_timeout=UPSTREAM_KEEPALIVE_SECONDS),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=5),
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def forward(self, request: web.Request, body: bytes | None) -> web.StreamResponse:
        """Stream the request (its body already read) to the web app and its answer back."""
        target = request.raw_path
        if not target.startswith("/"):
            # Absolute form (`GET http://host/path`): only its path and query go on.
            target = request.rel_url.raw_path_qs
        if not target.startswith("/"):
            return problem_response(
                400, "invalid_request", "Bad request", "The request target must be a path."
            )
        headers = [
            (k, wire_header(v)) for k, v in request.headers.items()
            if k.lower() not in _HOP_BY_HOP and k.lower() != "x-forwarded-for"
        ]
        # One X-Forwarded-For: the client's chain (several headers read as one
        # list, RFC 9110 §5.3) with this hop's peer appended.
        peer = request.remote or ""
        chain = [*request.headers.getall("X-Forwarded-For", ()), peer]
        headers.append(("X-Forwarded-For", wire_header(", ".join(v for v in chain if v))))
        attempts = 2 if request.method in RETRIED_METHODS else 1
        for attempt in range(1, attempts + 1):
            try:
                return await self._send(request, target, headers, body)
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
        return problem_response(502, "bad_gateway", "Bad gateway", detail)

    async def _send(
        self, request: web.Request, target: str, headers: list[tuple[str, str]],
        body: bytes | None,
    ) -> web.StreamResponse:
        assert self._session is not None
        # encoded=True: yarl would otherwise re-quote the target (%2F -> /, %7E -> ~,
        # %zz -> %25zz) and resolve dot segments; the web app gets the bytes the client sent.
        url = URL(self.url + target, encoded=True)
        async with self._session.request(
            request.method, url, headers=headers, data=body, allow_redirects=False,
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
