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
-- Retire the address's outstanding links of one purpose and queue the email
-- with the new one, in a single statement. Matches nothing when the address
-- has no account (or, for verify, is already verified): one round trip
-- either way, so a request for an unknown address takes as long as for a
-- known one. Returns the job id and the new version.
WITH bumped AS (
    UPDATE users
    SET reset_version = reset_version + (%(purpose)s = 'reset')::int,
        verify_version = verify_version + (%(purpose)s = 'verify')::int,
        -- Anyone can ask for a resend, so its link proves the mailbox but
        -- not who chose the stored password: confirming it must choose one.
        signup_count = CASE WHEN %(purpose)s = 'verify' THEN greatest(signup_count, 2)
                            ELSE signup_count END
    WHERE email = %(email)s AND (%(purpose)s = 'reset' OR email_verified_at IS NULL)
    RETURNING id, email,
              CASE WHEN %(purpose)s = 'reset' THEN reset_version ELSE verify_version END AS version
), queued AS (
    INSERT INTO email_jobs (template, recipient, payload, user_id, purpose, token_version, issued_at,
                            app_id)
    SELECT %(purpose)s, email, %(payload)s, id, %(purpose)s, version, %(issued_at)s,
           %(app_id)s::uuid FROM bumped
    RETURNING id, token_version
)
SELECT id, token_version, pg_notify(%(channel)s, '') FROM queued;

