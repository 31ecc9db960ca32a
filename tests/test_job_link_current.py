"""One rule for "is this job's link still current" (migrations/0035 job_link_current).

The claim reads the version from it and skips a job whose link was replaced
(ClaimedJob.superseded); the console's redrive asks it and refuses such a
job. Both must say the same for every kind of link.
"""

from __future__ import annotations

import pytest

from authsvc.operators.actions import Q as ACTIONS
from authsvc.worker import jobs

# (purpose, the job's version, arrange the account; current?)
CASES = [
    ("reset", 0, "", True),
    ("reset", 0, "UPDATE users SET reset_version = 1 WHERE id = %(user)s", False),
    ("verify", 0, "", True),
    ("sign_in", 0, "UPDATE users SET sign_in_version = 2 WHERE id = %(user)s", False),
    ("email_change_approval", 0, "UPDATE users SET email_change_version = 1 WHERE id = %(user)s",
     False),
    ("email_revert", 3, "INSERT INTO email_changes (user_id, version, old_email, new_email,"
     " changed_at) VALUES (%(user)s, 3, 'old@example.com', 'new@example.com', now())", True),
    ("email_revert", 3, "INSERT INTO email_changes (user_id, version, old_email, new_email,"
     " changed_at, ended_at, ended_by) VALUES (%(user)s, 3, 'old@example.com',"
     " 'new@example.com', now(), now(), 'voided')", False),
    ("console_login", 0, "INSERT INTO operators (user_id) VALUES (%(user)s)", True),
    ("console_login", 0, "", False),  # the role is gone
    (None, None, "", True),  # no link: nothing to replace
]


@pytest.mark.parametrize(("purpose", "version", "arrange", "current"), CASES)
def test_the_claim_and_the_redrive_agree_on_every_kind_of_link(
        conn, purpose, version, arrange, current):
    user = conn.execute("INSERT INTO users (email, password_hash) VALUES"
                        " ('ann@example.com', 'x') RETURNING id").fetchone()[0]
    if arrange:
        conn.execute(arrange, {"user": user})
    job_id = conn.execute(
        "INSERT INTO email_jobs (template, recipient, user_id, purpose, token_version, issued_at)"
        " VALUES ('reset', 'ann@example.com', %s, %s, %s, CASE WHEN %s::text IS NOT NULL"
        " THEN now() END) RETURNING id", (user, purpose, version, purpose)).fetchone()[0]
    row = conn.execute(ACTIONS["job_link_current"], {"job_id": job_id}).fetchone()
    assert row == (current,)
    [claimed] = jobs.claim_batch(conn, "test:1:x", 10, 30)
    assert claimed.id == job_id
    assert claimed.superseded is (not current)
