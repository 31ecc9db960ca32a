-- "Count one event" as a function, so a statement that does something else
-- can count as it goes (issue 11: an API call's key lookup and its count
-- against the key's budget were two round trips; authsvc/sql/apps.sql
-- find_app_counting_call is now one). authsvc/sql/ratelimit.sql `hit` calls
-- it too: the upsert is written once.
--
-- Returns the window's total after this event. With wait_for_disk false
-- the commit of the calling statement's transaction does not wait for its
-- WAL flush (set_config's third argument: this transaction only);
-- authsvc/ratelimit.py allows that only for a statement that is its own
-- transaction. PL/pgSQL, not SQL: a SQL function that writes is never
-- inlined and would have its body planned at every call.
CREATE FUNCTION rate_limit_hit(counted_bucket text, counted_window timestamptz,
                               wait_for_disk boolean)
RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    total integer;
BEGIN
    IF NOT wait_for_disk THEN
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    INSERT INTO rate_limit_counters AS c (bucket, window_start, hits)
    VALUES (counted_bucket, counted_window, 1)
    ON CONFLICT (bucket, window_start) DO UPDATE SET hits = c.hits + 1
    RETURNING c.hits INTO total;
    RETURN total;
END $$;
