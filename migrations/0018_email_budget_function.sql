-- "One email to an address, counted against its budget; within it, the
-- address's code tries start afresh" as one function. Signups did this in
-- Python (ratelimit.hit, then a second statement for the tries) and link
-- requests in SQL (outbox/producer.sql queue_link's CTEs): one rule
-- written twice. Both call this now (authsvc/sql/codes.sql email_budget_hit
-- and queue_link). The count waits for the disk, as it did in both.
CREATE FUNCTION email_budget_hit(budget_bucket text, budget_window timestamptz,
                                 budget_limit integer, tries_purpose text, tries_digest bytea)
RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    allowed boolean;
BEGIN
    allowed := rate_limit_hit(budget_bucket, budget_window, budget_limit, true);
    IF allowed THEN
        -- A sent email brings a new code with five fresh tries; an address
        -- with nothing to send gets them too, or retired tries would tell
        -- which addresses have accounts.
        PERFORM code_attempts_forget_unissued(tries_purpose, tries_digest);
    END IF;
    RETURN allowed;
END $$;
