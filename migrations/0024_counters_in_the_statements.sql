-- The outbox counters without triggers: the statements that change the
-- outbox write their own deltas, the worker folds them, a read adds up.
--
-- 0011 kept outbox_counters with statement-level triggers on email_jobs and
-- email_job_events; 0012, 0013 and 0017 then rewrote those triggers three
-- times to win back what they cost the worker's statements. Measured side
-- by side at 10 million retained jobs (bench/counters_options.py,
-- docs/worker.md "Counters: the options measured"), deltas written by the
-- statements themselves cost the claim and the record of 100 jobs no more
-- than the triggers did, and a read that adds the unfolded deltas to the
-- totals stays within the /metrics budget without writing anything.
--
-- What each writer now adds to outbox_counter_deltas, in the statement that
-- makes the change (so the two commit together or not at all):
--
--   worker/jobs.sql claim_batch      events_claimed, events_lease_expired
--                                    (a claimed row that still had a lease
--                                    owner: its lease ran out unrecorded);
--   worker/jobs.sql record_outcomes  jobs_<final status>, events_<event>
--                                    (lease_lost included), the histogram;
--   authsvc/outbox/admin.sql redrive_job  jobs_failed -1, events_redriven;
--   authsvc/outbox/admin.sql prune_jobs   jobs_<status> -n.
--
-- Queueing a job writes nothing (a pending job is counted live). A hand-made
-- UPDATE of email_jobs is no longer counted: an operator changes jobs with
-- `authsvc outbox redrive` and `prune`, which are.
--
-- The deltas stay bounded without a scraper: every worker process folds
-- them about once a second (admin.fold_counters, one fold at a time), and
-- `outbox prune` folds when it is done. A read never folds: it adds the
-- deltas not yet folded to the totals through outbox_counter_totals(), in one
-- snapshot, so it sees a fold entirely or not at all and never goes back.
--
-- Apply with the workers of this release: a worker of the previous release
-- writes no deltas, so what it records while the triggers are gone is not
-- counted.

DROP TRIGGER outbox_count_inserted_jobs ON email_jobs;
DROP TRIGGER outbox_count_updated_jobs ON email_jobs;
DROP TRIGGER outbox_count_deleted_jobs ON email_jobs;
DROP TRIGGER outbox_count_lease_takeovers ON email_jobs;
DROP TRIGGER outbox_count_inserted_events ON email_job_events;
DROP FUNCTION outbox_count_job_changes();
DROP FUNCTION outbox_count_lease_takeovers();
DROP FUNCTION outbox_count_events();
DROP FUNCTION outbox_latency_deltas(float8[]);

-- The histogram's counters become one per bucket: a send adds one to the
-- bucket it falls in (send_latency_bucket_<b>: above the bound below b, at
-- most b), not to every bound above it, so an outcome statement writes one or
-- two rows where it wrote up to eleven. The cumulative counts /metrics shows
-- are running sums at read time. What the triggers left is folded first.
WITH folded AS (
    DELETE FROM outbox_counter_deltas RETURNING name, delta, seconds
)
INSERT INTO outbox_counters AS c (name, total, seconds)
SELECT name, sum(delta), sum(seconds) FROM folded GROUP BY name
ON CONFLICT (name) DO UPDATE
SET total = c.total + excluded.total, seconds = c.seconds + excluded.seconds;
INSERT INTO outbox_counters (name, total)
SELECT 'send_latency_bucket_' || bound::text, le - coalesce(lag(le) OVER (ORDER BY bound), 0)
FROM (
    SELECT bound, coalesce(c.total, 0) AS le
    FROM unnest(outbox_latency_bounds()) AS bound
    LEFT JOIN outbox_counters AS c ON c.name = 'send_latency_le_' || bound::text
) AS cumulative;
DELETE FROM outbox_counters WHERE starts_with(name, 'send_latency_le_');

-- Every counter's total now: folded, plus the deltas not yet folded. A SQL
-- function of one SELECT: the planner inlines it into the query that reads it.
CREATE FUNCTION outbox_counter_totals() RETURNS TABLE (name text, total bigint, seconds float8)
LANGUAGE sql STABLE AS $$
    SELECT name, sum(total)::bigint, sum(seconds)::float8
    FROM (
        SELECT name, total, seconds FROM outbox_counters
        UNION ALL
        SELECT name, delta, seconds FROM outbox_counter_deltas
    ) AS counted
    GROUP BY name
$$;
