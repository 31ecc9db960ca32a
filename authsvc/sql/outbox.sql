-- insert_job --
-- Queue one email; called inside the transaction that made it necessary.
INSERT INTO email_jobs (template, recipient, payload, user_id, purpose, token_version, issued_at)
VALUES (%(template)s, %(recipient)s, %(payload)s, %(user_id)s, %(purpose)s,
        %(token_version)s, %(issued_at)s)
RETURNING id;

-- notify_workers --
-- Wake idle workers; PostgreSQL delivers it only if the transaction commits.
SELECT pg_notify('authsvc_outbox', '');
