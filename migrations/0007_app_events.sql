-- Events for embedding apps (issue 13, SPEC §9): app webhooks and revocation,
-- and webhook deliveries as a second kind of outbox job.

-- webhook_secret is the app's whsec_ secret sealed with AES-GCM under a key
-- derived from AUTHSVC_SECRET_KEYS (authsvc/webhook_secrets.py): the worker
-- must recover it to sign, so it cannot be hashed like the API key, and a
-- database dump alone does not reveal it. A revoked app's key stops working
-- and its pending deliveries fail; the row stays for the outbox's history.
ALTER TABLE apps
    ADD COLUMN webhook_url    text,
    ADD COLUMN webhook_secret bytea,
    ADD COLUMN revoked_at     timestamptz,
    ADD CONSTRAINT apps_webhook_has_secret CHECK (webhook_url IS NULL OR webhook_secret IS NOT NULL);

-- kind 'webhook': template holds the event type, recipient the webhook URL at
-- the time the event was queued, payload {"webhook_id", "event": {"type",
-- "timestamp", "data"}}. The claim, lease, retry and audit trail are the
-- email jobs' own. app_id on an email job names the app whose API call queued
-- it: the flow that app started, whose events it receives.
ALTER TABLE email_jobs
    ADD COLUMN kind   text NOT NULL DEFAULT 'email'
                      CONSTRAINT email_jobs_kind_check CHECK (kind IN ('email', 'webhook')),
    ADD COLUMN app_id uuid REFERENCES apps (id);
ALTER TABLE email_jobs DROP CONSTRAINT email_jobs_template_check;
-- NOT VALID then VALIDATE: the scan of existing rows does not block writes.
ALTER TABLE email_jobs ADD CONSTRAINT email_jobs_template_check CHECK (
    (kind = 'email' AND template IN ('verify', 'reset', 'account_exists', 'password_changed'))
    OR (kind = 'webhook' AND app_id IS NOT NULL
        AND template IN ('user.verified', 'user.password_changed',
                         'email.delivered', 'email.failed'))
) NOT VALID;
ALTER TABLE email_jobs VALIDATE CONSTRAINT email_jobs_template_check;
