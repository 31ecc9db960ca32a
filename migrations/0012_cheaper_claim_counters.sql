-- Counting re-claimed leases without a probe per claim (issue 11).
--
-- 0011 counted events_lease_expired in the audit trail's trigger: for every
-- new 'claimed' event it looked up the job's previous event. On a young
-- table whose statistics still said "empty" that lookup was a sequential
-- scan of the whole trail, per claimed row: 11-17 ms for a claim of 64 jobs
-- at 5,000 jobs queued, growing with the trail
-- (tests/test_worker_statement_reads.py counts the rows it read).
--
-- The fact is on the job row itself: only a claim raises attempt_count,
-- and every way a claim ends (an outcome, a release, a redrive) clears
-- lease_owner. So a claim whose row still had a lease owner took over a
-- lease that expired unrecorded. That is 0011's rule ("a claim whose
-- previous event for the job was also a claim") except where a late
-- lease_lost row fell between two claims: 0011 missed that expiry, this
-- counts it. A trigger of its own on the jobs table sees both rows in its
-- transition tables, so counting is one join of the statement's own rows,
-- whatever the table's size or statistics; 0011's jobs trigger is unchanged.

CREATE FUNCTION outbox_count_lease_takeovers() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO outbox_counter_deltas (name, delta)
    SELECT 'events_lease_expired', count(*) FROM old_jobs AS o JOIN new_jobs AS n USING (id)
    WHERE n.attempt_count > o.attempt_count AND o.lease_owner IS NOT NULL
    HAVING count(*) > 0;
    RETURN NULL;
END $$;

CREATE TRIGGER outbox_count_lease_takeovers AFTER UPDATE ON email_jobs
    REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_count_lease_takeovers();

-- The trail's trigger keeps only its per-event totals.
CREATE OR REPLACE FUNCTION outbox_count_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO outbox_counter_deltas (name, delta)
    SELECT 'events_' || event, count(*) FROM new_events GROUP BY event;
    RETURN NULL;
END $$;
