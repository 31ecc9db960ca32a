-- authsvc schema, core PostgreSQL only (no extensions: the embedded server ships none).

CREATE TABLE users (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email               text NOT NULL,
    password_hash       text NOT NULL,
    email_verified_at   timestamptz,
    -- The only valid link per purpose carries the current version; issuing a
    -- link or redeeming one bumps it, which retires every older link.
    reset_version       integer NOT NULL DEFAULT 0,
    verify_version      integer NOT NULL DEFAULT 0,
    -- Bumped on password change: every web session carries the value it saw.
    session_version     integer NOT NULL DEFAULT 0,
    password_changed_at timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    -- The application normalises; the check makes a missed path fail loudly.
    CONSTRAINT users_email_normalised CHECK (email = lower(btrim(email))),
    CONSTRAINT users_email_length CHECK (length(email) BETWEEN 3 AND 254)
);
CREATE UNIQUE INDEX users_email_key ON users (email);

-- One row per redeemed link, so a stale link can say "already used" rather
-- than "replaced by a newer one".
CREATE TABLE token_redemptions (
    user_id     bigint NOT NULL REFERENCES users (id),
    purpose     text NOT NULL CHECK (purpose IN ('reset', 'verify')),
    version     integer NOT NULL,
    redeemed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, purpose, version)
);

-- Embedding apps. Only a SHA-256 of the API key is kept: keys are 256-bit
-- random strings, so a slow hash would add latency and no safety.
CREATE TABLE apps (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name          text NOT NULL,
    key_hash      bytea NOT NULL UNIQUE,
    redirect_urls text[] NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT apps_name_length CHECK (length(name) BETWEEN 1 AND 100)
);

-- The transactional outbox. Rows carry the token version and issued_at,
-- never a usable token: the worker mints the signed link when it sends.
CREATE TABLE email_jobs (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    template            text NOT NULL
                        CHECK (template IN ('verify', 'reset', 'account_exists', 'password_changed')),
    recipient           text NOT NULL,
    payload             jsonb NOT NULL DEFAULT '{}',
    status              text NOT NULL DEFAULT 'pending'
                        CHECK (status IN ('pending', 'sent', 'failed', 'superseded', 'expired')),
    lease_owner         text,
    lease_expires_at    timestamptz,
    attempt_count       integer NOT NULL DEFAULT 0,
    created_at          timestamptz NOT NULL DEFAULT now(),
    next_attempt_at     timestamptz NOT NULL DEFAULT now(),
    sent_at             timestamptz,
    user_id             bigint REFERENCES users (id),
    purpose             text CHECK (purpose IN ('reset', 'verify')),
    token_version       integer,
    issued_at           timestamptz,
    provider_message_id text,
    last_error          text,
    CONSTRAINT email_jobs_token_fields CHECK (
        (purpose IS NULL) = (token_version IS NULL) AND (purpose IS NULL) = (issued_at IS NULL)
    )
);
-- Serves the claim: only pending rows, in due order. A claimed row keeps
-- status 'pending' with next_attempt_at moved to its lease expiry, so a
-- crashed worker's row becomes due again exactly when its lease runs out.
CREATE INDEX email_jobs_due ON email_jobs (next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX email_jobs_status_created ON email_jobs (status, created_at);
CREATE INDEX email_jobs_user ON email_jobs (user_id);

-- Append-only trail of what happened to each job.
CREATE TABLE email_job_events (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id              bigint NOT NULL REFERENCES email_jobs (id) ON DELETE CASCADE,
    event               text NOT NULL,
    lease_owner         text,
    lease_expires_at    timestamptz,
    attempt             integer,
    token_version       integer,
    provider_message_id text,
    error               text,
    created_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX email_job_events_job ON email_job_events (job_id, id);

-- Fixed-window counters; keys are hashed so no address is stored here.
CREATE TABLE rate_limit_counters (
    bucket       text NOT NULL,
    window_start timestamptz NOT NULL,
    hits         integer NOT NULL,
    PRIMARY KEY (bucket, window_start)
);

-- Idempotency-Key records for the JSON API, written in the same transaction
-- as the request's effects.
CREATE TABLE idempotency_keys (
    app_id        uuid NOT NULL REFERENCES apps (id),
    key           text NOT NULL,
    fingerprint   bytea NOT NULL,
    status_code   integer NOT NULL,
    response_body bytea NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);

-- The scoped test inbox (only written when AUTHSVC_TEST_INBOX is on).
CREATE TABLE inbox_messages (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope        text NOT NULL CHECK (scope = lower(scope)),
    mail_from    text,
    recipients   text[] NOT NULL,
    subject      text,
    message_id   text,
    headers      jsonb NOT NULL DEFAULT '{}',
    text_body    text,
    html_body    text,
    links        text[] NOT NULL DEFAULT '{}',
    raw          bytea NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX inbox_messages_scope ON inbox_messages (scope, id);
CREATE INDEX inbox_messages_received ON inbox_messages (received_at);
