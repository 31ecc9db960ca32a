-- Counting re-claimed leases without a probe per claim (issue 11).
--
-- 0011 counted events_lease_expired in the audit trail's trigger: for every
-- new 'claimed' event it looked up the job's previous event. On a young
-- table whose statistics still said "empty" that lookup was a sequential
-- scan of the whole trail, per claimed row: 11-17 ms for a claim of 64 jobs
-- at 5,000 jobs queued, growing with the trail (measured in
-- bench/claim_plan.py's setting; docs/BENCHMARKS.md).
--
-- The fact is on the job row itself: only a claim raises attempt_count,
-- and every way a claim ends (an outcome, a release, a redrive) clears
-- lease_owner. So a claim whose row still had a lease owner took over a
-- lease that expired unrecorded. That is 0011's rule ("a claim whose
-- previous event for the job was also a claim") except where a late
-- lease_lost row fell between two claims: 0011 missed that expiry, this
-- counts it. The jobs trigger sees both rows in its transition tables, so
-- counting is one join of the statement's own rows, whatever the table's
-- size or statistics.

CREATE OR REPLACE FUNCTION outbox_count_job_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO outbox_counter_deltas (name, delta)
        SELECT 'jobs_' || status, count(*) FROM new_jobs WHERE status <> 'pending' GROUP BY status;
        INSERT INTO outbox_counter_deltas (name, delta, seconds)
        SELECT * FROM outbox_latency_deltas(ARRAY(
            SELECT extract(epoch FROM sent_at - created_at)::float8 FROM new_jobs
            WHERE status = 'sent'))
        WHERE delta <> 0;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO outbox_counter_deltas (name, delta)
        SELECT 'events_lease_expired', count(*) FROM old_jobs AS o JOIN new_jobs AS n USING (id)
        WHERE n.attempt_count > o.attempt_count AND o.lease_owner IS NOT NULL
        HAVING count(*) > 0;
        -- A claim changes no status: nothing more to count.
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
        INSERT INTO outbox_counter_deltas (name, delta, seconds)
        SELECT * FROM outbox_latency_deltas(ARRAY(
            SELECT extract(epoch FROM n.sent_at - n.created_at)::float8
            FROM old_jobs AS o JOIN new_jobs AS n USING (id)
            WHERE n.status = 'sent' AND o.status <> 'sent'))
        WHERE delta <> 0;
    ELSE
        INSERT INTO outbox_counter_deltas (name, delta)
        SELECT 'jobs_' || status, -count(*) FROM old_jobs WHERE status <> 'pending' GROUP BY status;
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION outbox_count_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO outbox_counter_deltas (name, delta)
    SELECT 'events_' || event, count(*) FROM new_events GROUP BY event;
    RETURN NULL;
END $$;
