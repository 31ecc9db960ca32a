-- Bounce and complaint suppression (issue 14, SPEC §10). An address a
-- provider reported as hard-bounced or complaining gets no more mail: the
-- worker ends its later jobs 'suppressed' (a final status) instead of sending.
-- Only an operator lifts it (`authsvc suppressions remove ADDRESS`).
CREATE TABLE suppressions (
    address             text PRIMARY KEY,  -- canonical form (authsvc.addresses)
    event               text NOT NULL,     -- e.g. email.bounced, email.complained
    provider            text NOT NULL,
    provider_message_id text,              -- the provider's id of the message it reported
    detail              text,
    suppressed_at       timestamptz NOT NULL DEFAULT now()
);

-- Webhook message ids already processed, so a captured delivery cannot be
-- replayed; kept well past the signature's five-minute tolerance.
CREATE TABLE provider_webhook_messages (
    provider     text NOT NULL,
    message_id   text NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, message_id)
);
CREATE INDEX provider_webhook_messages_received ON provider_webhook_messages (received_at);

ALTER TABLE email_jobs DROP CONSTRAINT email_jobs_status_check;
ALTER TABLE email_jobs ADD CONSTRAINT email_jobs_status_check
    CHECK (status IN ('pending', 'sent', 'failed', 'superseded', 'expired', 'suppressed'));
