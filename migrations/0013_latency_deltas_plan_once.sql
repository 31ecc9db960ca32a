-- The jobs trigger's latency histogram, planned once per session instead of
-- once per statement (issue 11: HTTP resets, the worker's outcomes).
--
-- 0011's trigger passed outbox_latency_deltas an ARRAY(SELECT …) argument.
-- A SQL function whose argument holds a subquery cannot be inlined, and a
-- SQL function that is not inlined has its body planned afresh at every
-- call: about 0.5 ms for every INSERT into email_jobs and every statement
-- that made jobs final. For a password-reset request, whose INSERT queues
-- one pending job and counts nothing, that was a third of the server's time.
--
-- Here the latencies go into a variable first, so the call takes a plain
-- parameter, the planner inlines the function, and PL/pgSQL keeps the
-- plan; and an INSERT of pending jobs (what every producer writes) returns
-- at once. What is counted is unchanged (tests/test_outbox_counters.py).
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
        -- A claim changes no status: one look at its rows, nothing written.
        IF NOT EXISTS (SELECT 1 FROM old_jobs AS o JOIN new_jobs AS n USING (id)
                       WHERE o.status <> n.status) THEN
            RETURN NULL;
        END IF;
        INSERT INTO outbox_counter_deltas (name, delta)
        SELECT 'jobs_' || s.status, sum(s.delta) FROM (
            SELECT o.status, -1 AS delta FROM old_jobs AS o JOIN new_jobs AS n USING (id)
            WHERE o.status <> n.status AND o.status <> 'pending'
            UNION ALL
            SELECT n.status, 1 FROM old_jobs AS o JOIN new_jobs AS n USING (id)
            WHERE o.status <> n.status AND n.status <> 'pending'
        ) AS s GROUP BY s.status;
        latencies := ARRAY(SELECT extract(epoch FROM n.sent_at - n.created_at)::float8
                           FROM old_jobs AS o JOIN new_jobs AS n USING (id)
                           WHERE n.status = 'sent' AND o.status <> 'sent');
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
