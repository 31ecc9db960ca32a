"""A WSGI app served by a real HTTP server in a thread of this process (no process started)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from werkzeug.serving import make_server

# How often a serve_forever loop looks whether shutdown() was called; shutdown()
# waits for that, up to the default 0.5 s, which a test would spend idle.
POLL_INTERVAL = 0.05


def serve_in_thread(server: Any) -> threading.Thread:
    """Run `server.serve_forever` in a daemon thread, quick to shut down; the thread."""
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": POLL_INTERVAL}, daemon=True
    )
    thread.start()
    return thread


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Serve `app` on a free 127.0.0.1 port for the block; yields its base URL."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = serve_in_thread(server)
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=10)
