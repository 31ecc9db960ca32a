"""The HTTP ceiling: one INSERT per POST on the same stack (gunicorn gthread, Flask, the pool).

Served exactly as `authsvc serve` serves the real app (bench/sections.py swaps
only the app in its gunicorn command line), so the gap to it is what a reset
request does beyond one write.
"""

from __future__ import annotations

import os

from flask import Flask, request

from authsvc.db.connections import create_pool, is_direct


def create_app() -> Flask:
    """POST /ceiling: parse the JSON body, insert one row, answer 202."""
    app = Flask(__name__)
    url = os.environ["AUTHSVC_DATABASE_URL"]
    # The same connection options the app gets (authsvc.db.is_direct).
    pool = create_pool(url, min_size=2, max_size=16, name="ceiling", check=False,
                       direct=is_direct(url, os.environ.get("AUTHSVC_DIRECT_DATABASE_URL")))

    @app.post("/ceiling")
    def ceiling() -> tuple[dict[str, str], int]:
        body = request.get_json(force=True)
        with pool.connection() as conn:
            conn.execute("INSERT INTO bench_ceiling (email) VALUES (%s)", (body["email"],))
        return {"status": "accepted"}, 202

    return app
