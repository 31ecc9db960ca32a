-- insert_job --
-- Queue one email; called inside the transaction that made it necessary.
INSERT INTO email_jobs (template, recipient, payload, user_id, purpose, token_version, issued_at,
                        app_id)
VALUES (%(template)s, %(recipient)s, %(payload)s, %(user_id)s, %(purpose)s,
        %(token_version)s, %(issued_at)s, %(app_id)s)
RETURNING id;

-- notify_workers --
-- Wake idle workers; PostgreSQL delivers it only if the transaction commits.
SELECT pg_notify(%(channel)s, '');

-- queue_link --
-- A link request in one statement, so one commit whether or not the address
-- has an account (a second commit would wait for a second WAL flush, and a
-- prober could time it). The address's email budget is counted for every
-- request, and within it the address gets fresh code tries (migrations/0020
-- email_budget_hit, which signups call too); its outstanding links of the
-- purpose are retired as the email with the new one is queued; that part matches
-- nothing when the address has no account (or, for verify, is already
-- verified), so a request for an unknown address runs the same statement
-- as for a known one. Returns whether the budget allowed the request and
-- the job id (NULL when nothing was queued).
WITH budget AS (
    SELECT email_budget_hit(%(bucket)s, %(window_start)s, %(limit)s, %(purpose)s, %(digest)s)
           AS allowed
), bumped AS (
    UPDATE users
    SET reset_version = reset_version + (%(purpose)s = 'reset')::int,
        verify_version = verify_version + (%(purpose)s = 'verify')::int,
        -- Anyone can ask for a resend, so its link proves the mailbox but
        -- not who chose the stored password: confirming it must choose one.
        signup_count = CASE WHEN %(purpose)s = 'verify' THEN greatest(signup_count, 2)
                            ELSE signup_count END
    WHERE email = %(email)s AND (%(purpose)s = 'reset' OR email_verified_at IS NULL)
      AND (SELECT allowed FROM budget)
    RETURNING id, email,
              CASE WHEN %(purpose)s = 'reset' THEN reset_version ELSE verify_version END AS version
), queued AS (
    INSERT INTO email_jobs (template, recipient, payload, user_id, purpose, token_version, issued_at,
                            app_id)
    -- An app's redirect_url applies only to its own accounts (migrations/0021):
    -- any other account's link opens authsvc's pages.
    SELECT %(purpose)s, email,
           CASE WHEN account_belongs_to_app(id, %(app_id)s::uuid) THEN %(payload)s::jsonb
                ELSE %(payload)s::jsonb - 'redirect_url' END,
           id, %(purpose)s, version, %(issued_at)s, %(app_id)s::uuid FROM bumped
    RETURNING id
)
SELECT b.allowed, q.id, CASE WHEN q.id IS NOT NULL THEN pg_notify(%(channel)s, '') END
FROM budget AS b LEFT JOIN queued AS q ON true;
