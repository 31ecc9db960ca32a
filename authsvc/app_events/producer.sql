-- flow_app --
-- The app whose API call queued the email carrying this link version: the
-- app that started the flow being completed (no row for flows started on
-- the web pages); its name; and whether the account was already that app's
-- when the email was queued (its redirect applied: "own_account", written
-- by accounts.sign_up and outbox/producer.sql queue_link).
SELECT j.app_id, coalesce(a.name, ''), coalesce((j.payload ->> 'own_account')::boolean, false)
FROM email_jobs AS j LEFT JOIN apps AS a ON a.id = j.app_id
WHERE j.user_id = %(user_id)s AND j.purpose = %(purpose)s AND j.token_version = %(version)s
  AND j.kind = 'email' AND j.app_id IS NOT NULL
ORDER BY j.id DESC
LIMIT 1;

-- queue_event --
-- One delivery of one event to a live app with a webhook, in the caller's
-- transaction; nothing for any other app. The envelope, and in it the
-- webhook-id every retry carries, is app_event_payload's (migrations/0026_baseline.sql).
INSERT INTO email_jobs (kind, template, recipient, payload, app_id, user_id)
SELECT 'webhook', %(type)s, a.webhook_url,
       app_event_payload(%(type)s::text, %(happened_at)s::timestamptz, %(data)s::jsonb),
       a.id, %(user_id)s
FROM apps AS a
WHERE a.id = %(app_id)s AND a.webhook_url IS NOT NULL AND a.revoked_at IS NULL
RETURNING id;

-- queue_account_event --
-- One delivery of one event to every app the account belongs to (SPEC §9,
-- §12: an address change, its undo, a deletion concern all of them), each a
-- live app with a webhook, in the caller's transaction. Membership is
-- account_belongs_to_app's (migrations/0026_baseline.sql). %(job_user_id)s is NULL for an
-- event about an account the same transaction deletes.
INSERT INTO email_jobs (kind, template, recipient, payload, app_id, user_id)
SELECT 'webhook', %(type)s, a.webhook_url,
       app_event_payload(%(type)s::text, %(happened_at)s::timestamptz, %(data)s::jsonb),
       a.id, %(job_user_id)s::bigint
FROM account_apps AS m
JOIN apps AS a ON a.id = m.app_id
WHERE m.user_id = %(user_id)s AND account_belongs_to_app(m.user_id, m.app_id)
  AND a.webhook_url IS NOT NULL AND a.revoked_at IS NULL
ORDER BY a.id
RETURNING id;
