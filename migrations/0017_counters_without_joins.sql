-- The outbox counters' triggers without a join of their transition tables
-- where none is needed (issue 11, the worker's server time per email).
--
-- 0013's jobs trigger joined old_jobs to new_jobs up to four times per
-- statement (has a status changed? which? which rows became sent?), and
-- 0012's takeover trigger once more. The planner knows nothing of a
-- transition table's size, so those joins cost about 1 ms for an outcome
-- statement of 100 jobs: a third of the statement (bench, EXPLAIN ANALYZE).
-- What each needs can be had from the two tables apart:
--
--   * jobs_<status> is a count of rows, so a statement changes it by the
--     rows it left in that status less the rows it found there; rows whose
--     status did not change add one and take one;
--   * a claim leaves every row pending, as it found it: nothing to count;
--   * the rows that became sent are the new sent rows, unless the
--     statement also found sent rows (an operator's UPDATE of sent jobs):
--     only then is the join asked which rows were sent before;
--   * a takeover (0012) is a row whose attempt_count rose while it still
--     had a lease owner: with no owner before, or no new attempt above the
--     lowest an owned row had (an outcome statement keeps every attempt),
--     there is none.
--
-- What is counted is unchanged (tests/test_outbox_counters.py).
CREATE OR REPLACE FUNCTION outbox_count_job_changes() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    latencies float8[];
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NOT EXISTS (SELECT 1 FROM new_jobs WHERE status <> 'pending') THEN
            RETURN NULL;  -- queued jobs: nothing final, nothing sent
        END IF;
        INSERT INTO outbox_counter_deltas (name, delta)
        SELECT 'jobs_' || status, count(*) FROM new_jobs WHERE status <> 'pending' GROUP BY status;
        latencies := ARRAY(SELECT extract(epoch FROM sent_at - created_at)::float8 FROM new_jobs
                           WHERE status = 'sent');
    ELSIF TG_OP = 'UPDATE' THEN
        IF NOT EXISTS (SELECT 1 FROM new_jobs WHERE status <> 'pending')
           AND NOT EXISTS (SELECT 1 FROM old_jobs WHERE status <> 'pending') THEN
            RETURN NULL;  -- a claim, or a retry: pending before and after
        END IF;
        INSERT INTO outbox_counter_deltas (name, delta)
        SELECT 'jobs_' || s.status, sum(s.delta) FROM (
            SELECT status, 1 AS delta FROM new_jobs WHERE status <> 'pending'
            UNION ALL
            SELECT status, -1 FROM old_jobs WHERE status <> 'pending'
        ) AS s GROUP BY s.status HAVING sum(s.delta) <> 0;
        IF EXISTS (SELECT 1 FROM old_jobs WHERE status = 'sent') THEN
            latencies := ARRAY(SELECT extract(epoch FROM n.sent_at - n.created_at)::float8
                               FROM old_jobs AS o JOIN new_jobs AS n USING (id)
                               WHERE n.status = 'sent' AND o.status <> 'sent');
        ELSE
            latencies := ARRAY(SELECT extract(epoch FROM sent_at - created_at)::float8
                               FROM new_jobs WHERE status = 'sent');
        END IF;
    ELSE
        INSERT INTO outbox_counter_deltas (name, delta)
        SELECT 'jobs_' || status, -count(*) FROM old_jobs WHERE status <> 'pending' GROUP BY status;
        RETURN NULL;
    END IF;
    IF cardinality(latencies) > 0 THEN
        INSERT INTO outbox_counter_deltas (name, delta, seconds)
        SELECT * FROM outbox_latency_deltas(latencies) WHERE delta <> 0;
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION outbox_count_lease_takeovers() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM old_jobs WHERE lease_owner IS NOT NULL)
       OR (SELECT max(attempt_count) FROM new_jobs)
          <= (SELECT min(attempt_count) FROM old_jobs WHERE lease_owner IS NOT NULL) THEN
        RETURN NULL;  -- a claim of unleased rows, or an outcome (no attempt rises)
    END IF;
    INSERT INTO outbox_counter_deltas (name, delta)
    SELECT 'events_lease_expired', count(*) FROM old_jobs AS o JOIN new_jobs AS n USING (id)
    WHERE n.attempt_count > o.attempt_count AND o.lease_owner IS NOT NULL
    HAVING count(*) > 0;
    RETURN NULL;
END $$;
