-- outbox_stats --
-- Jobs per status, plus what an operator watches: due now, leased, oldest
-- pending. `authsvc outbox stats` and /metrics both read this one query, and
-- due is the claim's own predicate (migrations/0005_outbox_rules.sql).
SELECT
    count(*) FILTER (WHERE status = 'pending') AS pending,
    count(*) FILTER (WHERE outbox_job_due(status, next_attempt_at, lease_expires_at)) AS due,
    count(*) FILTER (WHERE outbox_job_leased(status, lease_expires_at)) AS leased,
    count(*) FILTER (WHERE status = 'sent') AS sent,
    count(*) FILTER (WHERE status = 'failed') AS failed,
    count(*) FILTER (WHERE status = 'superseded') AS superseded,
    count(*) FILTER (WHERE status = 'expired') AS expired,
    count(*) FILTER (WHERE status = 'suppressed') AS suppressed,
    coalesce(extract(epoch FROM now() - min(created_at) FILTER (WHERE status = 'pending')), 0)::float8
        AS oldest_pending_seconds
FROM email_jobs;

-- list_jobs --
-- Newest jobs first, optionally of one status.
SELECT id, status, template, recipient, attempt_count, created_at, next_attempt_at,
       lease_owner, lease_expires_at, sent_at, last_error
FROM email_jobs
WHERE %(status)s::text IS NULL OR status = %(status)s::text
ORDER BY id DESC
LIMIT %(limit)s;

-- find_job --
-- One job with every column an operator may need.
SELECT id, status, template, recipient, attempt_count, created_at, next_attempt_at,
       lease_owner, lease_expires_at, sent_at, last_error, user_id, purpose,
       token_version, issued_at, provider_message_id
FROM email_jobs WHERE id = %(job_id)s;

-- job_events --
-- A job's audit trail, oldest first.
SELECT id, event, lease_owner, lease_expires_at, attempt, token_version, provider_message_id,
       error, created_at
FROM email_job_events WHERE job_id = %(job_id)s ORDER BY id;

-- redrive_job --
-- Give a failed job a fresh set of attempts, due now; returns nothing for other states.
WITH redriven AS (
    UPDATE email_jobs
    SET status = 'pending', attempt_count = 0, next_attempt_at = now(), last_error = NULL,
        lease_owner = NULL, lease_expires_at = NULL
    WHERE id = %(job_id)s AND status = 'failed'
    RETURNING id, token_version
)
INSERT INTO email_job_events (job_id, event, token_version, error)
SELECT id, 'redriven', token_version, %(note)s FROM redriven
RETURNING job_id;

-- prune_jobs --
-- Delete up to %(batch)s finished jobs (and, by cascade, their trails) created before
-- the cutoff, oldest first: one short transaction per batch, never a table's worth of locks.
DELETE FROM email_jobs
WHERE id IN (
    SELECT id FROM email_jobs
    WHERE status IN ('sent', 'failed', 'superseded', 'expired', 'suppressed')
      AND created_at < now() - make_interval(secs => %(older_than_seconds)s)
    ORDER BY created_at
    LIMIT %(batch)s
);

-- event_totals --
-- Audit-trail events by kind, plus claims that took over an expired lease
-- (a claim whose previous event for the job was also a claim).
SELECT event, count(*) AS total FROM email_job_events GROUP BY event
UNION ALL
SELECT 'lease_expired', count(*) FROM (
    SELECT event, lag(event) OVER (PARTITION BY job_id ORDER BY id) AS previous
    FROM email_job_events
) AS trail
WHERE event = 'claimed' AND previous = 'claimed';

-- send_latency --
-- Queue-to-accepted seconds of sent jobs, as cumulative histogram buckets.
SELECT bound, count(*) FILTER (WHERE extract(epoch FROM sent_at - created_at) <= bound) AS le
FROM unnest(%(bounds)s::float8[]) AS bound
LEFT JOIN email_jobs ON status = 'sent'
GROUP BY bound ORDER BY bound;

-- send_latency_totals --
-- Sum and count for the histogram.
SELECT coalesce(sum(extract(epoch FROM sent_at - created_at)), 0)::float8 AS total_seconds,
       count(*) AS sent
FROM email_jobs WHERE status = 'sent';
