"""The test inbox's pages for people: scopes, messages, search, deletion, live updates.

Served by authsvc.inbox.server (one aiohttp app, one route table for all of /_inbox). Pages
are rendered on the server; one script of our own (static/live.js) keeps
them current from GET /_inbox/events, a server-sent event stream, and sizes
the email's sandboxed frame to its content. Nothing a sender wrote is ever
parsed as HTML outside that frame.
"""

from __future__ import annotations

import asyncio
import json
import mimetypes
from collections.abc import Awaitable, Callable
from contextlib import suppress
from email.utils import format_datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

import jinja2
import psycopg
from aiohttp import web
from psycopg import Connection

from authsvc.inbox import csrf, link_states, messages, params, search
from authsvc.inbox.params import BadRequest
from authsvc.observability.logs import log_event
from authsvc.resources import templates_dir

if TYPE_CHECKING:
    from authsvc.inbox.server import InboxServer

PREFIX = "/_inbox"
Snapshot = Callable[[], Awaitable[tuple[str, Any]]]  # an event's name and its data
EVENTS_HEARTBEAT_SECONDS = 15.0
EVENTS_DEBOUNCE_SECONDS = 0.2
EVENTS_RETRY_MS = 2000
# A message page's link states change when someone redeems a link, which the
# inbox hears nothing of: its stream reads them again this often.
LINK_RECHECK_SECONDS = 2.0
# The UI runs one script of its own (live.js) and frames email HTML from its
# own origin; nothing else may load or run.
UI_POLICY = (
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; "
    "img-src 'self'; frame-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'"
)
# The email's own HTML: its inline styles and inline images, never a script,
# a form, or a request to the network (tracking pixels stay dark). Its sandbox
# allows the same origin, and nothing else, so that live.js in the page around
# it can read how tall it is and grow the frame to fit (no inner scrollbar);
# without allow-scripts nothing in the email runs, same origin or not.
EMAIL_POLICY = (
    "sandbox allow-same-origin; default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "font-src data:; frame-ancestors 'self'; base-uri 'none'; form-action 'none'"
)
_STATIC_DIR = Path(__file__).parent / "static"
_STATIC = {path.name: path.read_bytes() for path in _STATIC_DIR.iterdir() if path.is_file()}
# The site's one icon (authsvc/web/pages/icon.py serves it to the web pages),
# read from its file so the inbox has it too when it runs without the web app.
_FAVICON = (Path(__file__).parent.parent / "web" / "pages" / "static" / "favicon.svg").read_bytes()
# The addresses the templates ask for by name (templates/inbox/*.html).
_URLS = {
    "inbox.index": PREFIX + "/",
    "inbox.events": PREFIX + "/events",
    "inbox.static": PREFIX + "/static/{filename}",
    "inbox.favicon": PREFIX + "/favicon.svg",
    "inbox.ui_open": PREFIX + "/ui/open",
    "inbox.ui_search": PREFIX + "/ui/search",
    "inbox.ui_scope": PREFIX + "/ui/scopes/{scope}",
    "inbox.ui_delete_scope": PREFIX + "/ui/scopes/{scope}/delete",
    "inbox.ui_message": PREFIX + "/ui/scopes/{scope}/messages/{message_id}",
    "inbox.ui_message_html": PREFIX + "/ui/scopes/{scope}/messages/{message_id}/html",
    "inbox.ui_delete_message": PREFIX + "/ui/scopes/{scope}/messages/{message_id}/delete",
    "inbox.get_raw_message": PREFIX + "/scopes/{scope}/messages/{message_id}/raw",
}
FORBIDDEN_DETAIL = (
    "This form is out of date or was sent from another site: reload the page and try again."
)


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


def _scope_or_404(raw: str) -> str:
    try:
        return params.scope(raw)
    except BadRequest:
        raise web.HTTPNotFound() from None


def _events_url(**query: object) -> str:
    present = {k: v for k, v in query.items() if v not in (None, "")}
    return url_for("inbox.events") + (f"?{urlencode(present)}" if present else "")


def _resent(found: list[messages.InboxMessage]) -> dict[int, int]:
    """Each re-send's id, mapped to the first message of its Message-ID."""
    resent: dict[int, int] = {}
    for group in messages.duplicate_groups(found):
        for inbox_id in group[1:]:
            resent[inbox_id] = group[0]
    return resent


class Pages:
    """The UI's handlers; `server` lends its database calls, its watcher and its settings."""

    def __init__(self, server: InboxServer) -> None:
        self.server = server
        self._templates = _templates()

    @property
    def _keys(self) -> tuple[str, ...]:
        return self.server.svc.settings.secret_keys

    def _page(self, template: str, status: int = 200, **context: object) -> web.Response:
        html = self._templates.get_template(template).render(**context)
        response = web.Response(status=status, text=html, content_type="text/html")
        response.headers["Content-Security-Policy"] = UI_POLICY
        return response

    async def _index(self, status: int = 200, **context: object) -> web.Response:
        scopes = await self.server._db(messages.list_scopes)
        return self._page("inbox/index.html", status, scopes=scopes,
                          domain=self.server.svc.settings.test_inbox_domain, **context)

    async def index(self, request: web.Request) -> web.StreamResponse:
        """Recent scopes; live.js keeps the table current from /_inbox/events."""
        return await self._index(deleted=request.query.get("deleted"))

    async def open_scope(self, request: web.Request) -> web.StreamResponse:
        """The 'open a scope' form: a GET with ?scope=."""
        raw = request.query.get("scope", "")
        try:
            scope = params.scope(raw)
        except BadRequest as exc:
            return await self._index(400, error=exc.detail, typed=raw)
        location = url_for("inbox.ui_scope", scope=scope)
        return web.Response(status=302, headers={"Location": location})

    async def search_page(self, request: web.Request) -> web.StreamResponse:
        """Search every scope: the API's query language, newest first, a page at a time."""
        raw = request.query.get("q", "")
        try:
            _, query, limit, older_than = self.server.search_request(request)
        except BadRequest as exc:
            return self._page("inbox/search.html", 400, q=raw, error=exc.detail, page=None)
        try:
            page = await self.server.searched(query, limit, older_than)
        except psycopg.errors.QueryCanceled:
            return self._page("inbox/search.html", 503, q=raw, page=None,
                              error=search.TIMEOUT_ADVICE)
        except search.SearchBusy:
            busy = self._page("inbox/search.html", 503, q=raw, page=None,
                              error=search.BUSY_ADVICE)
            busy.headers["Retry-After"] = search.BUSY_RETRY_AFTER
            return busy
        older = None
        if page.more:
            older = url_for("inbox.ui_search") + "?" + urlencode(
                {"q": raw, "older_than": page.messages[-1].id})
        return self._page("inbox/search.html", q=raw, page=page, older=older,
                          paged=older_than != params.MAX_ID)

    async def scope_page(self, request: web.Request) -> web.StreamResponse:
        """A scope's messages, newest first, re-sends of one job marked; filterable; live."""
        scope = _scope_or_404(request.match_info["scope"])
        filters = params.filters(request.query)
        page = await self.server._db(messages.list_messages, scope, filters=filters, bodies=False)
        return self._page(
            "inbox/scope.html", scope=scope, messages=list(reversed(page.messages)),
            more=page.more, resent=_resent(page.messages), filters=filters,
            events=_events_url(scope=scope, to=filters.to, subject=filters.subject, q=filters.q),
            csrf=csrf.form_token(self._keys, f"scope/{scope}"),
        )

    async def message_page(self, request: web.Request) -> web.StreamResponse:
        """One message: framed HTML, text, headers, raw source, the code and each link's state."""
        scope = _scope_or_404(request.match_info["scope"])
        message_id = int(request.match_info["message_id"])
        svc = self.server.svc

        def read(conn: Connection) -> tuple[messages.InboxMessage, list[link_states.LinkState]]:
            found = messages.get_message(conn, scope, message_id)
            if found is None:
                raise web.HTTPNotFound()
            return found, [link_states.link_state(conn, svc, url) for url in found.links]

        found, links = await self.server._db(read)
        return self._page(
            "inbox/message.html", scope=scope, message=found, links=links,
            code=found.code, received=format_datetime(found.received_at),
            events=_events_url(scope=scope, message=message_id),
            csrf=csrf.form_token(self._keys, f"message/{scope}/{message_id}"),
        )

    async def message_html(self, request: web.Request) -> web.StreamResponse:
        """The email's HTML part, for the sandboxed frame only."""
        scope = _scope_or_404(request.match_info["scope"])
        found = await self.server._db(
            messages.get_message, scope, int(request.match_info["message_id"])
        )
        if found is None or found.html_body is None:
            raise web.HTTPNotFound()
        response = web.Response(text=found.html_body, content_type="text/html")
        response.headers["Content-Security-Policy"] = EMAIL_POLICY
        response.headers["X-Frame-Options"] = "SAMEORIGIN"
        return response

    async def _allowed(self, request: web.Request, target: str) -> bool:
        form = await request.post()
        token = form.get("csrf")
        return isinstance(token, str) and csrf.token_allows(self._keys, target, token)

    async def delete_scope(self, request: web.Request) -> web.StreamResponse:
        """The scope page's "Delete this scope" form (POST, with its CSRF token)."""
        scope = _scope_or_404(request.match_info["scope"])
        if not await self._allowed(request, f"scope/{scope}"):
            return self.server.forbidden()
        await self.server._db(messages.delete_scope, scope)
        location = url_for("inbox.index") + "?" + urlencode({"deleted": scope})
        return web.Response(status=303, headers={"Location": location})

    async def delete_message(self, request: web.Request) -> web.StreamResponse:
        """The message page's "Delete this message" form (POST, with its CSRF token)."""
        scope = _scope_or_404(request.match_info["scope"])
        message_id = int(request.match_info["message_id"])
        if not await self._allowed(request, f"message/{scope}/{message_id}"):
            return self.server.forbidden()
        await self.server._db(messages.delete_message, scope, message_id)
        location = url_for("inbox.ui_scope", scope=scope)
        return web.Response(status=303, headers={"Location": location})

    async def static(self, request: web.Request) -> web.StreamResponse:
        """The UI's stylesheet and script (the only files it loads besides the icon)."""
        name = request.match_info["filename"]
        if name not in _STATIC:
            raise web.HTTPNotFound()
        content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
        return web.Response(body=_STATIC[name], content_type=content_type)

    async def favicon(self, request: web.Request) -> web.StreamResponse:
        """The site's icon, for the inbox's pages whether or not the web app runs beside it."""
        return web.Response(body=_FAVICON, content_type="image/svg+xml")

    # -- live updates ------------------------------------------------------

    def _snapshot(self, request: web.Request) -> tuple[Snapshot, float]:
        """What the stream pushes, read from its query (400 before the stream starts), and how
        often it reads again without news."""
        server, svc = self.server, self.server.svc
        raw_scope, raw_message = request.query.get("scope"), request.query.get("message")
        if raw_scope is None:
            if raw_message is not None:
                raise BadRequest("message needs scope")

            async def scopes() -> tuple[str, Any]:
                found = await server._db(messages.list_scopes)
                return "scopes", {"scopes": [s.as_json() for s in found]}

            return scopes, float("inf")
        scope = params.scope(raw_scope)
        if raw_message is not None:
            message_id = params.integer(request.query, "message", 0, params.MAX_ID)

            async def one() -> tuple[str, Any]:
                found = await server._db(link_states.message, svc, scope, message_id)
                return "message", {"message": found.as_json() if found else None}

            return one, LINK_RECHECK_SECONDS
        filters = params.filters(request.query)

        async def listing() -> tuple[str, Any]:
            page = await server._db(link_states.listing, svc, scope, filters=filters, bodies=False)
            return "messages", {
                "scope": scope,
                "messages": [m.as_json() for m in reversed(page.messages)],
                "more": page.more,
                "duplicates": messages.duplicate_groups(page.messages),
            }

        return listing, float("inf")

    async def events(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: the recent scopes (no query), a scope's messages (?scope=, with
        its filters) or one message (?scope=&message=), now and again whenever they change.

        On a database error the stream ends rather than answering 503: a 503
        can no longer be sent once the stream has begun, and EventSource gives
        up for good on a non-200 answer but reconnects (after `retry`) when a
        stream ends.
        """
        snapshot, recheck = self._snapshot(request)
        watcher = self.server.watcher
        loop = asyncio.get_running_loop()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            await response.write(f"retry: {EVENTS_RETRY_MS}\n\n".encode())
            shown, written_at = "", loop.time()
            while not watcher.closed:  # a stopping server ends the stream: the client reconnects
                name, body = await snapshot()
                data = json.dumps(body)
                if data != shown:  # news may be a poll's turn or a reconnect: push only changes
                    await response.write(f"event: {name}\ndata: {data}\n\n".encode())
                    shown, written_at = data, loop.time()
                looked_at = loop.time()
                while True:
                    quiet_for = EVENTS_HEARTBEAT_SECONDS - (loop.time() - written_at)
                    look_in = recheck - (loop.time() - looked_at)
                    if quiet_for <= 0:
                        await response.write(b": still here\n\n")
                        written_at = loop.time()
                    elif look_in <= 0 or await watcher.any_news(min(quiet_for, look_in)):
                        break
                await asyncio.sleep(EVENTS_DEBOUNCE_SECONDS)  # one update for a burst of mail
            await response.write_eof()
        except ConnectionResetError:
            pass  # the browser went away
        except psycopg.Error as exc:
            log_event(self.server.log, "database_unavailable", path=request.path,
                      error=type(exc).__name__)
            with suppress(ConnectionResetError):
                await response.write_eof()
        return response
