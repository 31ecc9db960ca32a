-- "Count one event, and is it within the limit?" as a function, so a
-- statement that does something else can count as it goes (issue 11: an
-- API call's key lookup and its count were two round trips, and a link
-- request took five; authsvc/sql/apps.sql find_app_counting_call and
-- authsvc/outbox/producer.sql queue_link are one each). authsvc/sql/
-- ratelimit.sql `hit` calls it too: the upsert and the "within" rule are
-- written once, here.
--
-- True while the window's total, this event included, is at most
-- `counted_limit`. With wait_for_disk false the commit of the calling
-- statement's transaction does not wait for its WAL flush (set_config's
-- third argument: this transaction only), so it is for a statement that is
-- its own transaction: authsvc/ratelimit.py check_own_transaction refuses
-- it in an explicit transaction or a pipeline, where every other write of
-- the transaction would lose its durability too. (The function cannot tell
-- by itself: under the extended protocol even a lone statement's
-- statement_timestamp() differs from its transaction_timestamp().)
-- PL/pgSQL, not SQL: a SQL function that writes is never inlined and
-- would have its body planned at every call.
CREATE FUNCTION rate_limit_hit(counted_bucket text, counted_window timestamptz,
                               counted_limit integer, wait_for_disk boolean)
RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
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
    RETURN total <= counted_limit;
END $$;
