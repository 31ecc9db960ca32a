-- fold_counters --
-- Move the outbox counters' deltas into their totals (migrations/0026_baseline.sql): the
-- deltas read here are deleted and their sums added, in one statement. Run
-- under lock_counters by one process at a time. Reads never need it: they
-- add what is not folded yet (outbox_counter_totals()).
WITH folded AS (
    DELETE FROM outbox_counter_deltas RETURNING name, delta, seconds
)
INSERT INTO outbox_counters AS c (name, total, seconds)
SELECT name, sum(delta), sum(seconds) FROM folded GROUP BY name
ON CONFLICT (name) DO UPDATE
SET total = c.total + excluded.total, seconds = c.seconds + excluded.seconds;

-- lock_counters --
-- One fold at a time (until the transaction ends); false when another process
-- is folding, and then there is no need to. Writers never wait on it: they
-- only append deltas.
SELECT pg_try_advisory_xact_lock(hashtext('authsvc.outbox_counters.fold'));

-- wait_for_counters --
-- lock_counters, waiting its turn: for a recount, which must not run beside a fold.
SELECT pg_advisory_xact_lock(hashtext('authsvc.outbox_counters.fold'));

-- recount_jobs --
-- Set each final status's counter to the jobs that have it now, less the deltas
-- not yet folded (they add themselves at the next fold or read), for the jobs
-- a counter never saw: recorded by a worker older than the statements' counting
-- (migration 0024, before the baseline), or changed by hand. Under
-- wait_for_counters, in one statement: the count and the deltas are one
-- snapshot, and a writer's job and delta commit together.
-- Returns what it corrected: the status, what was counted, what is there.
WITH live AS (
    SELECT 'jobs_' || s.status AS name, s.status, coalesce(c.jobs, 0) AS jobs
    FROM unnest(%(statuses)s::text[]) AS s (status)
    LEFT JOIN (SELECT status, count(*) AS jobs FROM email_jobs GROUP BY status) AS c
           ON c.status = s.status
), unfolded AS (
    SELECT name, sum(delta) AS delta FROM outbox_counter_deltas GROUP BY name
), wrong AS (
    SELECT l.name, l.status, l.jobs, coalesce(t.total, 0) AS counted,
           coalesce(u.delta, 0) AS unfolded
    FROM live AS l
    LEFT JOIN outbox_counter_totals() AS t ON t.name = l.name
    LEFT JOIN unfolded AS u ON u.name = l.name
    WHERE coalesce(t.total, 0) <> l.jobs
), corrected AS (
    INSERT INTO outbox_counters AS c (name, total)
    SELECT name, jobs - unfolded FROM wrong
    ON CONFLICT (name) DO UPDATE SET total = excluded.total
)
SELECT status, counted, jobs AS live FROM wrong ORDER BY status;

-- pending_figures --
-- What an operator watches on the pending side, live: pending, due now, leased,
-- the oldest. Over the pending rows only (the partial index email_jobs_due),
-- so it does not grow with the retained jobs; due is the claim's own
-- predicate (migrations/0026_baseline.sql).
SELECT count(*) AS pending,
       count(*) FILTER (WHERE outbox_job_due(status, next_attempt_at, lease_expires_at)) AS due,
       count(*) FILTER (WHERE outbox_job_leased(status, lease_expires_at)) AS leased,
       coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 AS oldest_pending_seconds
FROM email_jobs WHERE status = 'pending';

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
    count(*) FILTER (WHERE status = 'cancelled') AS cancelled,
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
-- A job that failed before public ids existed has none: it gets one now.
WITH redriven AS (
    UPDATE email_jobs
    SET status = 'pending', attempt_count = 0, next_attempt_at = now(), last_error = NULL,
        lease_owner = NULL, lease_expires_at = NULL,
        public_id = coalesce(public_id, gen_random_uuid())
    WHERE id = %(job_id)s AND status = 'failed'
    RETURNING id, token_version
), logged AS (
    INSERT INTO email_job_events (job_id, event, token_version, error)
    SELECT id, 'redriven', token_version, %(note)s FROM redriven
), counted AS (
    -- The outbox counters a redrive moves (migrations/0026_baseline.sql).
    INSERT INTO outbox_counter_deltas (name, delta)
    SELECT name, delta FROM redriven, (VALUES ('jobs_failed', -1), ('events_redriven', 1))
                                      AS change (name, delta)
)
SELECT id FROM redriven;

-- cancel_job --
-- Stop a job for good: a failed one, or a pending one no worker holds (a held
-- one may be on the wire already). Returns nothing for any other job. The
-- trail row and the counters it moves are written in the same statement.
WITH target AS (
    SELECT id, status FROM email_jobs
    WHERE id = %(job_id)s
      AND (status = 'failed'
           -- Never leased: lease_expires_at is null, and so is outbox_job_leased().
           OR (status = 'pending'
               AND NOT coalesce(outbox_job_leased(status, lease_expires_at), false)))
    FOR UPDATE
), cancelled AS (
    UPDATE email_jobs AS j
    SET status = 'cancelled', last_error = %(note)s, lease_owner = NULL, lease_expires_at = NULL
    FROM target AS t WHERE j.id = t.id
    RETURNING j.id, j.token_version, t.status AS was
), logged AS (
    INSERT INTO email_job_events (job_id, event, token_version, error)
    SELECT id, 'cancelled', token_version, %(note)s FROM cancelled
), counted AS (
    INSERT INTO outbox_counter_deltas (name, delta)
    SELECT change.name, change.delta
    FROM cancelled, LATERAL (VALUES ('jobs_cancelled', 1), ('events_cancelled', 1),
                                    ('jobs_failed', CASE WHEN was = 'failed' THEN -1 ELSE 0 END))
                    AS change (name, delta)
    WHERE change.delta <> 0
)
SELECT id FROM cancelled;

-- prune_jobs --
-- Delete up to %(batch)s finished jobs (and their trails: outbox_delete_trails) created before
-- the cutoff, oldest first: one short transaction per batch, never a table's worth of locks.
-- Returns how many it deleted; the deleted jobs leave the status counters,
-- while the event counters and the histogram, totals since install, keep them.
-- A row another transaction holds (a redrive making it pending) is passed by,
-- left to the next prune; the status is said again in the DELETE so a row
-- changed since the batch was chosen is rechecked, never deleted as pending.
-- The batch is chosen once, as the claim chooses its jobs (worker/jobs.sql): as
-- `id IN (SELECT … LIMIT … FOR UPDATE SKIP LOCKED)` a plan that rescans the
-- subquery skips the rows this statement has already deleted and takes the next,
-- so one "batch" could grow to the whole table.
WITH batch AS MATERIALIZED (
    SELECT id FROM email_jobs
    WHERE status IN ('sent', 'failed', 'superseded', 'expired', 'suppressed', 'cancelled')
      AND created_at < now() - make_interval(secs => %(older_than_seconds)s)
    ORDER BY created_at
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
), pruned AS (
    DELETE FROM email_jobs
    WHERE id = ANY (ARRAY(SELECT id FROM batch))
      AND status IN ('sent', 'failed', 'superseded', 'expired', 'suppressed', 'cancelled')
    RETURNING status
), counted AS (
    INSERT INTO outbox_counter_deltas (name, delta)
    SELECT 'jobs_' || status, -count(*) FROM pruned GROUP BY status
)
SELECT count(*) FROM pruned;

-- counter_totals --
-- Every counter (migrations/0026_baseline.sql), folded or not: final jobs by status now
-- (jobs_<status>), and since install, so pruned trails stay counted, events by
-- kind (events_<event>; events_lease_expired: claims that took over a lease
-- that ran out) and the send-latency histogram (send_latency_bucket_<bound>,
-- send_latency: count and seconds).
SELECT name, total, seconds FROM outbox_counter_totals();

-- latency_bounds --
-- The bounds the histogram keeps, and each one's bucket counter.
SELECT bound, 'send_latency_bucket_' || bound::text AS name
FROM unnest(outbox_latency_bounds()) AS bound ORDER BY bound;

-- sent_to --
-- Whether authsvc sent a provider's notification's message to this address: an
-- email job the provider took within the window, whose recipient is the address
-- and whose provider message id and public id are the ones given (each one that
-- is given; neither given matches nothing). email_jobs_recipient (0036) finds
-- the address's jobs; neither id needs an index of its own.
SELECT 1 FROM email_jobs
WHERE status = 'sent' AND sent_at > now() - make_interval(secs => %(within_seconds)s)
  AND kind = 'email' AND recipient = %(address)s
  AND (%(message_id)s::text IS NOT NULL OR %(public_job_id)s::text IS NOT NULL)
  AND (%(message_id)s::text IS NULL OR provider_message_id = %(message_id)s::text)
  AND (%(public_job_id)s::text IS NULL OR public_id::text = %(public_job_id)s::text)
LIMIT 1;
