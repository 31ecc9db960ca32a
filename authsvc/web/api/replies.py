"""API responses as plain values: status, exact body bytes, extra headers.

Keeping a reply as bytes (not a Flask Response) is what lets an idempotent
retry be answered with the first response byte for byte.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from flask import Response

JSON = "application/json"
PROBLEM_JSON = "application/problem+json"


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()

    def to_response(self, *, replayed: bool = False) -> Response:
        """The Flask response; `replayed` marks an answer served from an idempotency record."""
        response = Response(self.body, status=self.status, mimetype=content_type_for(self.status))
        for name, value in self.headers:
            response.headers[name] = value
        # Bodies may name accounts; no shared cache should keep them.
        response.headers["Cache-Control"] = "no-store"
        if replayed:
            response.headers["Idempotent-Replayed"] = "true"
        return response


def content_type_for(status: int) -> str:
    return PROBLEM_JSON if status >= 400 else JSON


def encode_json(document: object) -> bytes:
    """Deterministic JSON bytes: equal documents always encode identically."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def json_reply(status: int, document: object) -> Reply:
    return Reply(status, encode_json(document))
