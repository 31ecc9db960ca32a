"""Schemathesis against /api/v1/openapi.json: no 5xx, every answer as documented.

Short mode (default, in CI) sends a few hundred generated requests; `make fuzz`
sets AUTHSVC_FUZZ_MODE=long for over 2,000 and prints the counts, and the inner
loop (`make test-fast`) AUTHSVC_FUZZ_MODE=quick for a quarter of the short mode's.
"""

from __future__ import annotations

from collections import Counter

import pytest
import schemathesis
from flask import Flask
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from authsvc.apps.keys import register_app
from tests.conftest import FUZZ_MODE

EXAMPLES = {"quick": 5, "short": 20, "long": 200}[FUZZ_MODE]  # per operation and generation mode
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]


@pytest.fixture
def env(env: dict[str, str]) -> dict[str, str]:
    # The frozen test clock never leaves the first window: without this the
    # per-app limit would turn most of the run into 429s.
    return {**env, "AUTHSVC_RATE_LIMIT_APP": "100000000/1m"}


@pytest.mark.timeout(1800 if FUZZ_MODE == "long" else 180)
def test_api_never_fails_and_answers_as_documented(app: Flask, conn) -> None:
    _record, key = register_app(conn, "fuzz", ["https://allowed.example.com/welcome"])
    schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", app)
    sent: Counter[str] = Counter()
    statuses: Counter[int] = Counter()
    failures: list[str] = []

    def exercise(operation, mode: GenerationMode) -> None:
        @settings(max_examples=EXAMPLES, deadline=None, database=None,
                  phases=[Phase.explicit, Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy(generation_mode=mode), email=st.emails(),
               real_email=st.sampled_from([True, False]),
               own_key=st.sampled_from([True] * 9 + [False]))
        def one(case, email: str, real_email: bool, own_key: bool) -> None:
            # The schema cannot say "an address we accept", so half the bodies
            # get a real-looking one; otherwise nearly every call stops at 400.
            if real_email and isinstance(case.body, dict) and "email" in case.body:
                case.body["email"] = email
            headers = dict(case.headers or {})
            if own_key:  # one call in ten keeps whatever Authorization was generated
                headers["Authorization"] = f"Bearer {key}"
            case.headers = headers
            response = case.call()
            sent[operation.label] += 1
            statuses[response.status_code] += 1
            try:
                case.validate_response(response, checks=CHECKS)
            except AssertionError as exc:  # collect all, report together
                failures.append(f"{operation.label} [{mode}]: {str(exc)[:600]}")

        one()

    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result.err()  # every operation in the document loads
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            exercise(result.ok(), mode)

    total = sum(sent.values())
    server_errors = sum(n for status, n in statuses.items() if status >= 500)
    print(f"\nfuzz: requests={total} server_errors={server_errors}"
          f" schema_mismatches={len(failures)} statuses={dict(sorted(statuses.items()))}")
    # At least ten operations' worth: some operation and mode pairs generate nothing.
    assert total >= 10 * EXAMPLES, sent
    assert not failures, "\n".join(failures[:10])
