"""Every HTTP provider as users run it: an `authsvc worker` process against the provider's fake.

The worker is configured the way an operator would (AUTHSVC_MAIL_URL in the
provider's own URL form) and drains a small queue through a fake that first
answers one 503; each email arrives once and its job records the id the
provider gave it.
"""

from __future__ import annotations

import pytest

from testkit.waiting import wait_until
from tests.provider_support import FAKES, running_fake
from tests.worker_support import queue_notices, start_worker_process, stop_process

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("name", list(FAKES))
def test_a_worker_process_delivers_through_each_provider(conn, env, tmp_path, name):
    job_ids = queue_notices(conn, 3)

    def statuses() -> list[str]:
        return [r[0] for r in conn.execute(
            "SELECT status FROM email_jobs WHERE id = ANY(%s)", (job_ids,))]

    with running_fake(name) as case:
        case.fake.fail_next(503, retry_after="0")
        log = tmp_path / "worker.log"
        worker = start_worker_process({**env, "AUTHSVC_MAIL_URL": case.fake.mail_url}, log,
                                      "--retry-base-seconds", "0.05", "--poll-seconds", "0.2")
        try:
            wait_until(lambda: statuses() == ["sent"] * 3, 30, "every job sent")
        finally:
            assert stop_process(worker) == 0
        delivered = case.fake.snapshot()
    rows = conn.execute("SELECT status, provider_message_id FROM email_jobs WHERE id = ANY(%s)",
                        (job_ids,)).fetchall()
    assert sorted(rows) == sorted(("sent", d.id) for d in delivered)
    assert sorted(d.to[0] for d in delivered) == ["user1@example.com", "user2@example.com",
                                                   "user3@example.com"]
    assert "Traceback" not in log.read_text()
