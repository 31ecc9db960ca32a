-- Outbox counters that stay cheap at any table size (issue 15, "a big outbox
-- stays fast"). `authsvc outbox stats` and /metrics counted every retained
-- row on each read: ~1 s at 10 million rows. Pending-side figures (pending,
-- due, leased, oldest) stay live queries over the pending rows only; the
-- final-state counts, the audit-trail event totals and the send-latency
-- histogram come from a rollup instead:
--
--   * statement-level triggers with transition tables append one row per
--     (statement, counter) to outbox_counter_deltas: insert-only, so the
--     worker's statements never wait on each other or on a scrape, and every
--     writer (worker outcomes, redrive, prune, an operator's UPDATE) is
--     counted, whatever its SQL;
--   * a read folds the deltas into outbox_counters (DELETE … RETURNING,
--     summed, in one short transaction that locks outbox_counters against
--     other folds only) and reads the totals.
--
-- What the figures mean (docs/OPERATIONS.md, "Outbox figures"):
--   jobs_<status>       rows of that final status now in email_jobs (prune
--                       and redrive take them off: the gauge stays exact);
--   events_<event>      audit-trail events written since install, plus
--                       events_lease_expired (a claim whose previous event for
--                       the job was also a claim); prune does not lower them;
--   send_latency_le_<b> jobs that became sent within b seconds of queueing,
--   send_latency        since install (count, and the seconds' sum).

-- The histogram's bounds: authsvc/metrics.py LATENCY_BOUNDS must match.
CREATE FUNCTION outbox_latency_bounds() RETURNS float8[] LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT '{0.05,0.1,0.25,0.5,1,2.5,5,10,30,60,300}'::float8[] $$;

CREATE TABLE outbox_counters (
    name text PRIMARY KEY,
    total bigint NOT NULL DEFAULT 0,
    seconds float8 NOT NULL DEFAULT 0
);

CREATE TABLE outbox_counter_deltas (
    name text NOT NULL,
    delta bigint NOT NULL,
    seconds float8 NOT NULL DEFAULT 0
);

-- Counter deltas for a set of jobs that newly became sent: the histogram.
CREATE FUNCTION outbox_latency_deltas(latencies float8[]) RETURNS TABLE (name text, delta bigint, seconds float8)
LANGUAGE sql STABLE AS $$
    SELECT 'send_latency_le_' || bound::text, count(*) FILTER (WHERE l <= bound), 0::float8
    FROM unnest(outbox_latency_bounds()) AS bound, unnest(latencies) AS l
    GROUP BY bound
    UNION ALL
    SELECT 'send_latency', count(*), coalesce(sum(l), 0) FROM unnest(latencies) AS l
$$;

CREATE FUNCTION outbox_count_job_changes() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE TRIGGER outbox_count_inserted_jobs AFTER INSERT ON email_jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_count_job_changes();
CREATE TRIGGER outbox_count_updated_jobs AFTER UPDATE ON email_jobs
    REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_count_job_changes();
CREATE TRIGGER outbox_count_deleted_jobs AFTER DELETE ON email_jobs
    REFERENCING OLD TABLE AS old_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_count_job_changes();

-- Events only ever add up: a pruned job's trail goes, its events stay counted.
CREATE FUNCTION outbox_count_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO outbox_counter_deltas (name, delta)
    SELECT 'events_' || event, count(*) FROM new_events GROUP BY event
    UNION ALL
    -- The same rule event_totals applied with lag() over the whole trail,
    -- asked of the new claims only: one index probe (email_job_events_job) each.
    SELECT 'events_lease_expired', count(*) FROM new_events AS n
    WHERE n.event = 'claimed'
      AND (SELECT e.event FROM email_job_events AS e
           WHERE e.job_id = n.job_id AND e.id < n.id ORDER BY e.id DESC LIMIT 1) = 'claimed'
    HAVING count(*) > 0;
    RETURN NULL;
END $$;

CREATE TRIGGER outbox_count_inserted_events AFTER INSERT ON email_job_events
    REFERENCING NEW TABLE AS new_events
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_count_events();

-- The figures so far. The triggers above already hold their tables' locks
-- (CREATE TRIGGER takes SHARE ROW EXCLUSIVE), so no write slips between
-- this count and the first delta.
INSERT INTO outbox_counters (name, total)
SELECT 'jobs_' || status, count(*) FROM email_jobs WHERE status <> 'pending' GROUP BY status;
INSERT INTO outbox_counters (name, total)
SELECT 'events_' || event, count(*) FROM email_job_events GROUP BY event
UNION ALL
SELECT 'events_lease_expired', count(*) FROM (
    SELECT event, lag(event) OVER (PARTITION BY job_id ORDER BY id) AS previous
    FROM email_job_events
) AS trail
WHERE event = 'claimed' AND previous = 'claimed';
INSERT INTO outbox_counters (name, total, seconds)
SELECT * FROM outbox_latency_deltas(ARRAY(
    SELECT extract(epoch FROM sent_at - created_at)::float8 FROM email_jobs WHERE status = 'sent'));
