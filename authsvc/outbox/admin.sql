-- fold_counters --
-- Move the outbox counters' deltas into their totals (migrations/0011): the
-- deltas read here are deleted and their sums added, in one statement. Run
-- under lock_counters, so two scrapes never fold the same rows twice or read
-- a total that misses a fold committed after their snapshot.
WITH folded AS (
    DELETE FROM outbox_counter_deltas RETURNING name, delta, seconds
)
INSERT INTO outbox_counters AS c (name, total, seconds)
SELECT name, sum(delta), sum(seconds) FROM folded GROUP BY name
ON CONFLICT (name) DO UPDATE
SET total = c.total + excluded.total, seconds = c.seconds + excluded.seconds;

-- lock_counters --
-- One fold at a time (until the transaction ends). Readers and the worker
-- never wait on it: the worker's triggers only append deltas.
SELECT pg_advisory_xact_lock(hashtext('authsvc.outbox_counters.fold'));

-- outbox_stats --
-- Jobs per status, plus what an operator watches: due now, leased, oldest
-- pending. `authsvc outbox stats` and /metrics both read this one query, and
-- due is the claim's own predicate (migrations/0005_outbox_rules.sql).
-- Pending-side figures are live, over the pending rows only (the partial
-- index email_jobs_due); final states come from the folded counters
-- (migrations/0011), so neither grows with the retained jobs.
WITH live AS (
    SELECT count(*) AS pending,
           count(*) FILTER (WHERE outbox_job_due(status, next_attempt_at, lease_expires_at)) AS due,
           count(*) FILTER (WHERE outbox_job_leased(status, lease_expires_at)) AS leased,
           min(created_at) AS oldest
    FROM email_jobs WHERE status = 'pending'
), final AS (
    SELECT coalesce(sum(total) FILTER (WHERE name = 'jobs_sent'), 0) AS sent,
           coalesce(sum(total) FILTER (WHERE name = 'jobs_failed'), 0) AS failed,
           coalesce(sum(total) FILTER (WHERE name = 'jobs_superseded'), 0) AS superseded,
           coalesce(sum(total) FILTER (WHERE name = 'jobs_expired'), 0) AS expired,
           coalesce(sum(total) FILTER (WHERE name = 'jobs_suppressed'), 0) AS suppressed
    FROM outbox_counters
)
SELECT live.pending, live.due, live.leased,
       final.sent::bigint AS sent, final.failed::bigint AS failed,
       final.superseded::bigint AS superseded, final.expired::bigint AS expired,
       final.suppressed::bigint AS suppressed,
       coalesce(extract(epoch FROM now() - live.oldest), 0)::float8 AS oldest_pending_seconds
FROM live, final;

-- live_outbox_stats --
-- outbox_stats counted straight from the table: every retained row, so slow
-- on a big outbox. The check the counters are tested against.
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
       token_version, issued_at, provider_message_id, public_id
FROM email_jobs WHERE id = %(job_id)s;

-- job_by_public_id --
-- The internal id of the job an email names (Message-ID, X-Authsvc-Job).
SELECT id FROM email_jobs WHERE public_id = %(public_id)s;

-- job_events --
-- A job's audit trail, oldest first.
SELECT id, event, lease_owner, lease_expires_at, attempt, token_version, provider_message_id,
       error, created_at
FROM email_job_events WHERE job_id = %(job_id)s ORDER BY id;

-- redrive_job --
-- Give a failed job a fresh set of attempts, due now; returns nothing for other states.
-- A job that failed before public ids existed (migrations/0019) gets one now.
WITH redriven AS (
    UPDATE email_jobs
    SET status = 'pending', attempt_count = 0, next_attempt_at = now(), last_error = NULL,
        lease_owner = NULL, lease_expires_at = NULL,
        public_id = coalesce(public_id, gen_random_uuid())
    WHERE id = %(job_id)s AND status = 'failed'
    RETURNING id, token_version
)
INSERT INTO email_job_events (job_id, event, token_version, error)
SELECT id, 'redriven', token_version, %(note)s FROM redriven
RETURNING job_id;

-- prune_jobs --
-- Delete up to %(batch)s finished jobs (and, by trigger, their trails: 0014) created before
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
-- Audit-trail events by kind since install, plus claims that took over an
-- expired lease (the job still had a lease owner: migrations/0012),
-- from the folded counters: pruned trails stay counted.
SELECT substr(name, length('events_') + 1) AS event, total
FROM outbox_counters WHERE starts_with(name, 'events_') AND total <> 0;

-- send_latency --
-- Queue-to-accepted seconds of jobs sent since install, as cumulative
-- histogram buckets; in_rollup is false for a bound the counters do not keep.
SELECT bound, coalesce(c.total, 0) AS le, bound = ANY (outbox_latency_bounds()) AS in_rollup
FROM unnest(%(bounds)s::float8[]) AS bound
LEFT JOIN outbox_counters AS c ON c.name = 'send_latency_le_' || bound::text
ORDER BY bound;

-- send_latency_totals --
-- Sum and count for the histogram.
SELECT coalesce(sum(seconds), 0)::float8 AS total_seconds, coalesce(sum(total), 0)::bigint AS sent
FROM outbox_counters WHERE name = 'send_latency';
