-- claim_batch --
-- Lease up to n due jobs, oldest first, and return what sending them needs.
-- Locking the ids in a CTE (not `WHERE id IN (SELECT … LIMIT n)`) keeps the
-- planner from updating more rows than the limit and lets it walk the
-- partial index email_jobs_due; handing them to the UPDATE as one array
-- makes it fetch exactly those rows by primary key (a join here chose a
-- sequential scan of a 20k-row outbox: see bench/claim_plan.py).
-- next_attempt_at moves to the lease expiry, so a job whose worker died
-- becomes due again exactly when its lease runs out.
WITH due AS (
    SELECT id FROM email_jobs
    WHERE status = 'pending'
      AND next_attempt_at <= now()
      AND (lease_expires_at IS NULL OR lease_expires_at <= now())
    ORDER BY next_attempt_at, id
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE email_jobs AS j
    SET lease_owner = %(owner)s,
        lease_expires_at = now() + make_interval(secs => %(lease_seconds)s),
        next_attempt_at = now() + make_interval(secs => %(lease_seconds)s),
        attempt_count = j.attempt_count + 1
    WHERE j.id = ANY (ARRAY(SELECT id FROM due))
    RETURNING j.id, j.template, j.recipient, j.payload, j.user_id, j.purpose,
              j.token_version, j.issued_at, j.attempt_count, j.lease_owner,
              j.lease_expires_at,
              (SELECT CASE j.purpose WHEN 'reset' THEN u.reset_version
                                     WHEN 'verify' THEN u.verify_version END
               FROM users AS u WHERE u.id = j.user_id) AS current_version,
              EXISTS (SELECT 1 FROM email_job_events AS e
                      WHERE e.job_id = j.id AND e.event = 'ambiguous') AS ambiguous_before
), logged AS (
    INSERT INTO email_job_events (job_id, event, lease_owner, lease_expires_at, attempt, token_version)
    SELECT id, 'claimed', lease_owner, lease_expires_at, attempt_count, token_version FROM claimed
)
SELECT * FROM claimed ORDER BY id;

-- finish_job --
-- Record a final outcome (sent, failed, superseded, expired) only while this
-- claim still holds the lease; zero rows back means the lease was lost.
-- The owner is one string per process, so a process that claimed the job
-- again after its own lease expired holds it under the same owner: the
-- attempt (incremented by every claim) tells the claims apart.
WITH finished AS (
    UPDATE email_jobs
    SET status = %(status)s,
        sent_at = CASE WHEN %(status)s = 'sent' THEN now() END,
        provider_message_id = %(provider_message_id)s,
        last_error = %(error)s,
        lease_owner = NULL,
        lease_expires_at = NULL
    WHERE id = %(job_id)s AND lease_owner = %(owner)s AND attempt_count = %(attempt)s
      AND status = 'pending'
    RETURNING id
)
INSERT INTO email_job_events
    (job_id, event, lease_owner, lease_expires_at, attempt, token_version, provider_message_id, error)
SELECT id, %(event)s, %(owner)s, %(lease_expires_at)s, %(attempt)s, %(token_version)s,
       %(provider_message_id)s, %(error)s
FROM finished
RETURNING job_id;

-- schedule_retry --
-- Back to pending after a transient failure, due again after the backoff;
-- only while this claim (owner and attempt) holds the lease.
WITH retried AS (
    UPDATE email_jobs
    SET next_attempt_at = now() + make_interval(secs => %(delay_seconds)s),
        last_error = %(error)s,
        lease_owner = NULL,
        lease_expires_at = NULL
    WHERE id = %(job_id)s AND lease_owner = %(owner)s AND attempt_count = %(attempt)s
      AND status = 'pending'
    RETURNING id
)
INSERT INTO email_job_events
    (job_id, event, lease_owner, lease_expires_at, attempt, token_version, error)
SELECT id, %(event)s, %(owner)s, %(lease_expires_at)s, %(attempt)s, %(token_version)s, %(error)s
FROM retried
RETURNING job_id;

-- release_lease --
-- Hand back a claimed job that was never sent (shutdown): due now, and the
-- attempt it did not make is not counted; only while this claim (owner and
-- attempt) holds the lease.
WITH released AS (
    UPDATE email_jobs
    SET next_attempt_at = now(),
        attempt_count = greatest(attempt_count - 1, 0),
        lease_owner = NULL,
        lease_expires_at = NULL
    WHERE id = %(job_id)s AND lease_owner = %(owner)s AND attempt_count = %(attempt)s
      AND status = 'pending'
    RETURNING id
)
INSERT INTO email_job_events (job_id, event, lease_owner, lease_expires_at, attempt, token_version, error)
SELECT id, 'released', %(owner)s, %(lease_expires_at)s, %(attempt)s, %(token_version)s, %(error)s
FROM released
RETURNING job_id;

-- append_event --
-- Add one entry to a job's audit trail (for events that change no row).
INSERT INTO email_job_events
    (job_id, event, lease_owner, lease_expires_at, attempt, token_version, provider_message_id, error)
VALUES (%(job_id)s, %(event)s, %(owner)s, %(lease_expires_at)s, %(attempt)s, %(token_version)s,
        %(provider_message_id)s, %(error)s);
