-- count_code_attempt --
-- One try at the code for an address, in one statement whether or not the
-- address has an account (same work, same time). Finds the email of this
-- purpose that was sent to this address and carries its account's current
-- version (none: the code is used, superseded, or was never sent; for
-- verify, also none once the address is proven). The accounts a code typed
-- with an address can be for: the one holding it (verify, reset, sign-in, a
-- change's approval, and a deletion confirmed at the account's own address), one changing to it
-- (email_change, SPEC §12: the code goes to the new address) and one whose
-- standing change moved it away from it (a deletion confirmed at the oldest
-- address holding an undo link); of these, the newest such email counts.
-- The statement then takes one of the address's twenty wrong codes
-- this hour (all purposes together; a fixed, aligned window in
-- rate_limit_counters) and, if it got one, one of the address's five tries
-- for this purpose. The five belong to the address, not to a version: only
-- an email allowed by its budget starts them afresh (email_budget_hit, in
-- the baseline migration); the twenty start afresh only with the next hour. So
-- nothing but the requests themselves decides the answer to a wrong code.
-- Returns one row: the target's user id, version and issued_at (NULL when
-- there is none) and the try's number, NULL when the hour's or the
-- purpose's tries were already used up (a try the hour refused leaves the
-- five as they were). The upserts' row locks, the hour's first, serialise
-- concurrent tries, so both caps hold under any concurrency.
WITH candidate AS (
    SELECT id FROM users
    WHERE email = %(email)s
      AND %(purpose)s IN ('reset', 'verify', 'account_delete', 'email_change_approval', 'sign_in')
    UNION ALL
    SELECT id FROM users
    WHERE pending_email = %(email)s AND %(purpose)s = 'email_change'
    UNION ALL
    SELECT user_id FROM email_changes
    WHERE old_email = %(email)s AND ended_at IS NULL AND %(purpose)s = 'account_delete'
), target AS (
    SELECT t.user_id, t.version, t.issued_at
    FROM (VALUES (1)) AS one (x)
    LEFT JOIN LATERAL (
        SELECT j.user_id, j.token_version AS version, j.issued_at
        FROM candidate AS c
        JOIN users AS u ON u.id = c.id
        CROSS JOIN LATERAL (
            SELECT id, user_id, token_version, issued_at FROM email_jobs
            WHERE user_id = u.id AND purpose = %(purpose)s
              AND token_version = link_version(u, %(purpose)s) AND recipient = %(email)s
            ORDER BY id DESC LIMIT 1
        ) AS j
        WHERE %(purpose)s <> 'verify' OR u.email_verified_at IS NULL
        ORDER BY j.id DESC LIMIT 1
    ) AS t ON true
), hour AS (
    INSERT INTO rate_limit_counters AS c (bucket, window_start, hits)
    VALUES (%(bucket)s, %(window_start)s, 1)
    ON CONFLICT (bucket, window_start) DO UPDATE SET hits = c.hits + 1
    WHERE c.hits < %(limit)s
    RETURNING c.hits
), counted AS (
    INSERT INTO code_attempts (purpose, address_digest, attempts, created_at)
    SELECT %(purpose)s, %(digest)s, 1, %(now)s FROM hour
    ON CONFLICT (purpose, address_digest)
    DO UPDATE SET attempts = code_attempts.attempts + 1
    WHERE code_attempts.attempts < %(max_attempts)s
    RETURNING attempts
)
SELECT target.user_id, target.version, target.issued_at, (SELECT attempts FROM counted)
FROM target;

-- give_back_code_attempt --
-- The code was right but the call failed for another reason (a password was
-- needed): that try does not count against the five. (Nor against the hour:
-- codes.forgive_right_code, for every right code.)
UPDATE code_attempts SET attempts = attempts - 1
WHERE purpose = %(purpose)s AND address_digest = %(digest)s AND attempts > 0;

-- email_budget_hit --
-- One email to the address counted against its budget; true while within it,
-- and then the address's code tries of this purpose start afresh, account or
-- not (migrations/0026_baseline.sql; outbox/producer.sql queue_link calls it too).
SELECT email_budget_hit(%(bucket)s, %(window_start)s, %(limit)s, %(purpose)s, %(digest)s);

-- prune_code_attempts --
-- Counts older than every link lifetime belong to codes that expired.
DELETE FROM code_attempts WHERE created_at < %(before)s;
