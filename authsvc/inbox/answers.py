"""What an expect-one answers once the waiting is over: 200, 409 or 408."""

from __future__ import annotations

from typing import Any

from authsvc.inbox.messages import Page, Seen, duplicate_groups
from authsvc.inbox.params import ExpectQuery
from authsvc.problem_documents import problem_document


def settle_left(query: ExpectQuery, seen: list[Seen]) -> float:
    """Seconds still to wait for a second message; settle counts from the first one's arrival."""
    if len(seen) != 1:
        return 0.0
    return query.settle - seen[0].age_seconds


def expect_one_answer(query: ExpectQuery, seen: list[Seen], page: Page) -> tuple[int, Any]:
    """200 for exactly one message, 409 for more (with duplicate groups), 408 for none."""
    if not seen or not page.messages:  # none, or emptied meanwhile
        detail = f"no message arrived in {query.scope!r} within {query.timeout:g} s"
        body = problem_document(
            408, "no_message", "No message", detail, count=0, messages=[], duplicates=[]
        )
        return 408, body
    if len(seen) == 1 and page.messages:
        return 200, {"message": page.messages[0].as_json()}
    return 409, {
        "count": len(seen),
        "messages": [m.as_json() for m in page.messages],
        "duplicates": duplicate_groups(seen),
    }
