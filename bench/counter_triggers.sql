-- Option a of bench/counters_options.py: the statement-level triggers that kept
-- the outbox counters until the statements wrote their own deltas, as
-- migrations 0011, 0012, 0013 and 0017 left them (migration 0024 dropped them;
-- the baseline, 0026, never had them). Kept here so the comparison can still be
-- run: bench/counters_options.py creates them on its own database only.

CREATE FUNCTION outbox_latency_deltas(latencies float8[]) RETURNS TABLE (name text, delta bigint, seconds float8)
LANGUAGE sql STABLE AS $$
    SELECT 'send_latency_le_' || bound::text, count(*) FILTER (WHERE l <= bound), 0::float8
    FROM unnest(outbox_latency_bounds()) AS bound, unnest(latencies) AS l
    GROUP BY bound
    UNION ALL
    SELECT 'send_latency', count(*), coalesce(sum(l), 0) FROM unnest(latencies) AS l
$$;

CREATE FUNCTION outbox_count_job_changes() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE TRIGGER outbox_count_inserted_jobs AFTER INSERT ON email_jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_count_job_changes();

CREATE TRIGGER outbox_count_updated_jobs AFTER UPDATE ON email_jobs
    REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_count_job_changes();

CREATE TRIGGER outbox_count_deleted_jobs AFTER DELETE ON email_jobs
    REFERENCING OLD TABLE AS old_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_count_job_changes();

CREATE FUNCTION outbox_count_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO outbox_counter_deltas (name, delta)
    SELECT 'events_' || event, count(*) FROM new_events GROUP BY event;
    RETURN NULL;
END $$;

CREATE TRIGGER outbox_count_inserted_events AFTER INSERT ON email_job_events
    REFERENCING NEW TABLE AS new_events
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_count_events();

CREATE FUNCTION outbox_count_lease_takeovers() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE TRIGGER outbox_count_lease_takeovers AFTER UPDATE ON email_jobs
    REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_count_lease_takeovers();
