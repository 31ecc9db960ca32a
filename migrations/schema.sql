-- authsvc's schema as the migrations leave it, in one file to read.
--
-- Nothing applies this file: `authsvc db upgrade` builds and upgrades every
-- database from the numbered migrations beside it, and only from them.
-- Below the marker line it is generated from a freshly migrated database
-- (`python -m tools.schema_sql`); tests/test_schema_file.py fails when a
-- migration changes the schema and the file was not regenerated, and checks
-- that this file run alone builds the same catalog. Above the marker it is
-- written by hand, and the tool keeps it.
--
-- =========================================================================
-- THE OUTBOX: email_jobs, and its audit trail email_job_events
-- =========================================================================
--
-- A job is an email (kind 'email') or an app event for an app's webhook
-- (kind 'webhook'); both go through the same states. email_jobs.status:
--
--   status      final  meaning
--   pending     no     waiting for next_attempt_at, or being sent ("claimed")
--   sent        yes    the mail server, provider or webhook receiver took it
--   failed      yes*   refused for good, or out of attempts; last_error says why
--                      (* an operator's redrive is the one way back)
--   superseded  yes    not sent: a newer link of the same purpose was issued
--   expired     yes    not sent: its link expired before it could go
--   suppressed  yes    not sent: the address bounced or complained (suppressions)
--
-- "Claimed" is not a status. It is pending with a live lease: lease_owner
-- set and lease_expires_at still ahead (outbox_job_leased()). A claim also
-- moves next_attempt_at to the lease's end, so the job of a worker that died
-- is due again (outbox_job_due()) exactly when its lease runs out. Every
-- change below writes its trail row in the same statement.
--
--   transition   from -> to                  made by                             trail event
--   queue        (new) -> pending            web and API, in the transaction of  -
--                                            the change that needs the email or
--                                            event; the worker's outcome
--                                            statement, for email.* events
--   claim        pending -> claimed          worker (authsvc/worker/jobs.sql             claimed
--                                            claim_batch), oldest due first
--   re-claim     claimed, lease run out      any worker, as a claim; counted as  claimed
--                -> claimed                  events_lease_expired
--   outcome      claimed -> sent, failed,    worker (authsvc/worker/jobs.sql             the status
--                superseded, expired or      record_outcomes), only while that
--                suppressed                  claim still holds the lease
--   retry        claimed -> pending          worker: a transient failure; due    retry
--                                            again after a backoff
--   ambiguous    claimed -> pending          worker: the connection broke after  ambiguous
--                                            the message was handed over; retried
--                                            once, a second one fails the job
--   release      claimed -> pending          worker: stopping, or too little     released
--                                            lease left to send; due now, the
--                                            attempt not counted
--   lease lost   (nothing changes)           worker whose outcome came after     lease_lost
--                                            its lease passed to another claim
--   redrive      failed -> pending           operator: `authsvc outbox redrive`  redriven
--                                            (fresh attempts, due now)
--   prune        final -> deleted            operator: `authsvc outbox prune`    -
--                                            (a job's trail goes with it)
--
-- email_job_events.event takes only these names (the CHECK
-- email_job_events_event_check, migration 0023, is the one list):
--
--   claimed     a worker leased the job; attempt is the claim's attempt_count
--   sent        taken by the mail server or provider (provider_message_id)
--   failed      refused for good, or out of attempts (error)
--   superseded  not sent: a newer link of the same purpose exists
--   expired     not sent: the link expired first
--   suppressed  not sent: the address is on the suppression list
--   retry       a transient failure; due again after a backoff (error)
--   ambiguous   broke after handing the message over: it may have arrived
--   released    handed back unsent; its attempt is not counted
--   lease_lost  an outcome too late to record: another claim held the lease
--   redriven    an operator gave a failed job fresh attempts (error: their note)
--
-- The outbox's figures (outbox stats, /metrics) count the pending side live
-- and take the rest from outbox_counters: the claim, outcome, redrive and
-- prune statements each append what they changed to outbox_counter_deltas
-- (migration 0024: jobs_<status>, events_<event>, events_lease_expired, the
-- send-latency buckets); every worker folds the deltas about once a second;
-- a read adds the unfolded ones (outbox_counter_totals()). docs/worker.md,
-- "Where the figures come from".
--
-- Python names the same sets (authsvc/outbox/rules.py STATUSES,
-- authsvc/worker/jobs.py FINAL_STATUSES and OUTCOME_EVENTS); tests/test_schema_file.py
-- holds them to these CHECKs.
--
-- =========================================================================
-- MISSING MIGRATION NUMBERS: 0003, 0009, 0010
-- =========================================================================
--
-- No file with these numbers was ever committed (`git log --all --
-- migrations/` adds none and deletes none). Numbers were handed out ahead,
-- one to each line of work started in parallel from the same commit, and
-- those three lines merged without a schema change; the history shows the
-- handing out, as 0007 was committed before 0005 and 0006. Three lines left
-- one commit together: account integrity took 0002, worker speed 0004, and
-- the test inbox at scale needed none (0003). Six later left another:
-- the outbox's one home (0005), email codes (0006), app events (0007) and
-- suppressions (0008) brought migrations; the tests' layout and the review
-- of account integrity (which changed 0002 in place) did not (0009, 0010).
--
-- Leave the gaps empty. The runner applies every file not yet recorded, in
-- number order, so a new 0003 would run first on a new database and last
-- on every existing one: two schemas from one set of files. A new migration
-- takes the number after the highest.

-- ==== Generated below this line by `python -m tools.schema_sql`: do not edit by hand. ====
-- From PostgreSQL 16 (other major versions may word expressions differently).

-- Functions that column defaults, checks or indexes call.

CREATE OR REPLACE FUNCTION public.unordered_id()
 RETURNS bigint
 LANGUAGE sql
RETURN (((((('x'::text || substr(md5((gen_random_uuid())::text), 1, 14)))::bit(56))::bigint >> 3) % '9007199254740991'::bigint) + 1);

CREATE TABLE schema_migrations (
    version    text NOT NULL,
    name       text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT schema_migrations_pkey PRIMARY KEY (version)
);

CREATE TABLE users (
    id                     bigint DEFAULT unordered_id() NOT NULL,
    email                  text NOT NULL,
    password_hash          text NOT NULL,
    email_verified_at      timestamp with time zone,
    reset_version          integer DEFAULT 0 NOT NULL,
    verify_version         integer DEFAULT 0 NOT NULL,
    password_changed_at    timestamp with time zone,
    created_at             timestamp with time zone DEFAULT now() NOT NULL,
    signup_count           integer DEFAULT 1 NOT NULL,
    email_change_version   integer DEFAULT 0 NOT NULL,
    account_delete_version integer DEFAULT 0 NOT NULL,
    email_revert_version   integer DEFAULT 0 NOT NULL,
    pending_email          text,
    sign_in_version        integer DEFAULT 0 NOT NULL,
    locale                 text,
    CONSTRAINT users_pkey PRIMARY KEY (id),
    CONSTRAINT users_email_length CHECK (((length(email) >= 3) AND (length(email) <= 254))),
    CONSTRAINT users_email_normalised CHECK ((email = lower(btrim(email)))),
    CONSTRAINT users_locale_length CHECK (((locale IS NULL) OR ((length(locale) >= 2) AND (length(locale) <= 35)))),
    CONSTRAINT users_pending_email_normalised CHECK (((pending_email = lower(btrim(pending_email))) AND ((length(pending_email) >= 3) AND (length(pending_email) <= 254))))
);
CREATE UNIQUE INDEX users_email_key ON public.users USING btree (email);
CREATE INDEX users_pending_email ON public.users USING btree (pending_email) WHERE (pending_email IS NOT NULL);

CREATE TABLE web_sessions (
    id           bigint DEFAULT unordered_id() NOT NULL,
    token_hash   bytea NOT NULL,
    user_id      bigint NOT NULL,
    created_at   timestamp with time zone NOT NULL,
    last_seen_at timestamp with time zone NOT NULL,
    user_agent   text DEFAULT ''::text NOT NULL,
    started_by   text DEFAULT 'password'::text NOT NULL,
    CONSTRAINT web_sessions_pkey PRIMARY KEY (id),
    CONSTRAINT web_sessions_token_hash_key UNIQUE (token_hash),
    CONSTRAINT web_sessions_user_id_fkey FOREIGN KEY (user_id) REFERENCES users(id) ON DELETE CASCADE,
    CONSTRAINT web_sessions_started_by_check CHECK ((started_by = ANY (ARRAY['password'::text, 'sign_in'::text]))),
    CONSTRAINT web_sessions_user_agent_check CHECK ((length(user_agent) <= 300))
);
CREATE INDEX web_sessions_user ON public.web_sessions USING btree (user_id, created_at);

CREATE TABLE token_redemptions (
    user_id     bigint NOT NULL,
    purpose     text NOT NULL,
    version     integer NOT NULL,
    redeemed_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT token_redemptions_pkey PRIMARY KEY (user_id, purpose, version),
    CONSTRAINT token_redemptions_user_id_fkey FOREIGN KEY (user_id) REFERENCES users(id),
    CONSTRAINT token_redemptions_purpose_check CHECK ((purpose = ANY (ARRAY['reset'::text, 'verify'::text, 'email_change'::text, 'email_change_approval'::text, 'account_delete'::text, 'sign_in'::text])))
);

CREATE TABLE code_attempts (
    purpose        text NOT NULL,
    address_digest bytea NOT NULL,
    attempts       integer NOT NULL,
    created_at     timestamp with time zone NOT NULL,
    CONSTRAINT code_attempts_pkey PRIMARY KEY (purpose, address_digest),
    CONSTRAINT code_attempts_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT code_attempts_purpose_check CHECK ((purpose = ANY (ARRAY['reset'::text, 'verify'::text, 'email_change'::text, 'email_change_approval'::text, 'account_delete'::text, 'sign_in'::text])))
);
CREATE INDEX code_attempts_created ON public.code_attempts USING btree (created_at);

CREATE TABLE rate_limit_counters (
    bucket       text NOT NULL,
    window_start timestamp with time zone NOT NULL,
    hits         integer NOT NULL,
    CONSTRAINT rate_limit_counters_pkey PRIMARY KEY (bucket, window_start)
);

CREATE TABLE apps (
    id               uuid DEFAULT gen_random_uuid() NOT NULL,
    name             text NOT NULL,
    key_hash         bytea NOT NULL,
    redirect_urls    text[] DEFAULT '{}'::text[] NOT NULL,
    created_at       timestamp with time zone DEFAULT now() NOT NULL,
    webhook_url      text,
    webhook_secret   bytea,
    revoked_at       timestamp with time zone,
    delivery_url     text,
    sign_up_by_email boolean DEFAULT false NOT NULL,
    product_name     text,
    logo_url         text,
    brand_color      text,
    support_url      text,
    default_locale   text,
    mail_from        text,
    CONSTRAINT apps_pkey PRIMARY KEY (id),
    CONSTRAINT apps_key_hash_key UNIQUE (key_hash),
    CONSTRAINT apps_brand_color_hex CHECK (((brand_color IS NULL) OR (brand_color ~ '^#[0-9a-f]{6}$'::text))),
    CONSTRAINT apps_default_locale_length CHECK (((default_locale IS NULL) OR ((length(default_locale) >= 2) AND (length(default_locale) <= 35)))),
    CONSTRAINT apps_delivery_has_secret CHECK (((delivery_url IS NULL) OR (webhook_secret IS NOT NULL))),
    CONSTRAINT apps_logo_url_https CHECK (((logo_url IS NULL) OR ((logo_url ~~ 'https://%'::text) AND (length(logo_url) <= 2048)))),
    CONSTRAINT apps_mail_from_length CHECK (((mail_from IS NULL) OR (length(mail_from) <= 320))),
    CONSTRAINT apps_name_length CHECK (((length(name) >= 1) AND (length(name) <= 100))),
    CONSTRAINT apps_product_name_length CHECK (((product_name IS NULL) OR ((length(product_name) >= 1) AND (length(product_name) <= 64)))),
    CONSTRAINT apps_support_url_http CHECK (((support_url IS NULL) OR ((support_url ~ '^https?://'::text) AND (length(support_url) <= 2048)))),
    CONSTRAINT apps_webhook_has_secret CHECK (((webhook_url IS NULL) OR (webhook_secret IS NOT NULL)))
);

CREATE TABLE idempotency_keys (
    app_id        uuid NOT NULL,
    key           text NOT NULL,
    fingerprint   bytea NOT NULL,
    status_code   integer NOT NULL,
    response_body bytea NOT NULL,
    created_at    timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT idempotency_keys_pkey PRIMARY KEY (app_id, key),
    CONSTRAINT idempotency_keys_app_id_fkey FOREIGN KEY (app_id) REFERENCES apps(id)
);
CREATE INDEX idempotency_keys_created ON public.idempotency_keys USING btree (created_at);

CREATE TABLE account_apps (
    user_id bigint NOT NULL,
    app_id  uuid NOT NULL,
    since   timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT account_apps_pkey PRIMARY KEY (user_id, app_id),
    CONSTRAINT account_apps_app_id_fkey FOREIGN KEY (app_id) REFERENCES apps(id) ON DELETE CASCADE,
    CONSTRAINT account_apps_user_id_fkey FOREIGN KEY (user_id) REFERENCES users(id) ON DELETE CASCADE
);

CREATE TABLE email_jobs (
    id                  bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    template            text NOT NULL,
    recipient           text NOT NULL,
    payload             jsonb DEFAULT '{}'::jsonb NOT NULL,
    status              text DEFAULT 'pending'::text NOT NULL,
    lease_owner         text,
    lease_expires_at    timestamp with time zone,
    attempt_count       integer DEFAULT 0 NOT NULL,
    created_at          timestamp with time zone DEFAULT now() NOT NULL,
    next_attempt_at     timestamp with time zone DEFAULT now() NOT NULL,
    sent_at             timestamp with time zone,
    user_id             bigint,
    purpose             text,
    token_version       integer,
    issued_at           timestamp with time zone,
    provider_message_id text,
    last_error          text,
    kind                text DEFAULT 'email'::text NOT NULL,
    app_id              uuid,
    public_id           uuid DEFAULT gen_random_uuid(),
    CONSTRAINT email_jobs_pkey PRIMARY KEY (id),
    CONSTRAINT email_jobs_app_id_fkey FOREIGN KEY (app_id) REFERENCES apps(id),
    CONSTRAINT email_jobs_user_id_fkey FOREIGN KEY (user_id) REFERENCES users(id),
    CONSTRAINT email_jobs_kind_check CHECK ((kind = ANY (ARRAY['email'::text, 'webhook'::text]))),
    CONSTRAINT email_jobs_purpose_check CHECK ((purpose = ANY (ARRAY['reset'::text, 'verify'::text, 'email_change'::text, 'email_change_approval'::text, 'email_revert'::text, 'account_delete'::text, 'sign_in'::text, 'console_login'::text]))),
    CONSTRAINT email_jobs_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'sent'::text, 'failed'::text, 'superseded'::text, 'expired'::text, 'suppressed'::text, 'cancelled'::text]))),
    CONSTRAINT email_jobs_template_check CHECK ((((kind = 'email'::text) AND (template = ANY (ARRAY['verify'::text, 'reset'::text, 'account_exists'::text, 'password_changed'::text, 'email_change'::text, 'email_change_approval'::text, 'email_in_use'::text, 'email_changed'::text, 'email_restored'::text, 'account_delete'::text, 'sign_in'::text, 'no_account'::text, 'console_code'::text]))) OR ((kind = 'webhook'::text) AND (app_id IS NOT NULL) AND (template = ANY (ARRAY['user.verified'::text, 'user.password_changed'::text, 'email.delivered'::text, 'email.failed'::text, 'user.email_changed'::text, 'user.email_restored'::text, 'user.deleted'::text]))))),
    CONSTRAINT email_jobs_token_fields CHECK ((((purpose IS NULL) = (token_version IS NULL)) AND ((purpose IS NULL) = (issued_at IS NULL))))
);
CREATE INDEX email_jobs_due ON public.email_jobs USING btree (next_attempt_at, id) WHERE (status = 'pending'::text);
CREATE INDEX email_jobs_recipient ON public.email_jobs USING btree (recipient, id);
CREATE INDEX email_jobs_status_created ON public.email_jobs USING btree (status, created_at);
CREATE INDEX email_jobs_user ON public.email_jobs USING btree (user_id);
CREATE INDEX email_jobs_webhook_created ON public.email_jobs USING btree (created_at) WHERE (kind = 'webhook'::text);

CREATE TABLE email_job_events (
    id                  bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    job_id              bigint NOT NULL,
    event               text NOT NULL,
    lease_owner         text,
    lease_expires_at    timestamp with time zone,
    attempt             integer,
    token_version       integer,
    provider_message_id text,
    error               text,
    created_at          timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT email_job_events_pkey PRIMARY KEY (id),
    CONSTRAINT email_job_events_event_check CHECK ((event = ANY (ARRAY['claimed'::text, 'sent'::text, 'failed'::text, 'superseded'::text, 'expired'::text, 'suppressed'::text, 'retry'::text, 'ambiguous'::text, 'released'::text, 'lease_lost'::text, 'redriven'::text, 'cancelled'::text])))
);
CREATE INDEX email_job_events_ambiguous ON public.email_job_events USING btree (job_id) WHERE (event = 'ambiguous'::text);
CREATE INDEX email_job_events_job ON public.email_job_events USING btree (job_id, id);
CREATE INDEX email_job_events_outcomes ON public.email_job_events USING btree (created_at) WHERE (event = ANY (ARRAY['sent'::text, 'failed'::text]));

CREATE TABLE outbox_counters (
    name    text NOT NULL,
    total   bigint DEFAULT 0 NOT NULL,
    seconds double precision DEFAULT 0 NOT NULL,
    CONSTRAINT outbox_counters_pkey PRIMARY KEY (name)
);

CREATE TABLE outbox_counter_deltas (
    name    text NOT NULL,
    delta   bigint NOT NULL,
    seconds double precision DEFAULT 0 NOT NULL
);

CREATE TABLE suppressions (
    address             text NOT NULL,
    event               text NOT NULL,
    provider            text NOT NULL,
    provider_message_id text,
    detail              text,
    suppressed_at       timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT suppressions_pkey PRIMARY KEY (address)
);

CREATE TABLE provider_webhook_messages (
    provider    text NOT NULL,
    message_id  text NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT provider_webhook_messages_pkey PRIMARY KEY (provider, message_id)
);
CREATE INDEX provider_webhook_messages_received ON public.provider_webhook_messages USING btree (received_at);

CREATE TABLE inbox_contents (
    id           bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    mail_from    text,
    subject      text,
    message_id   text,
    headers      jsonb DEFAULT '{}'::jsonb NOT NULL,
    text_body    text,
    html_body    text,
    links        text[] DEFAULT '{}'::text[] NOT NULL,
    raw          bytea NOT NULL,
    stored_bytes bigint GENERATED ALWAYS AS ((((octet_length(raw))::bigint + COALESCE(octet_length(text_body), 0)) + COALESCE(octet_length(html_body), 0))) STORED,
    code         text,
    CONSTRAINT inbox_contents_pkey PRIMARY KEY (id)
);

CREATE TABLE inbox_messages (
    id          bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    scope       text NOT NULL,
    recipients  text[] NOT NULL,
    content_id  bigint NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT inbox_messages_pkey PRIMARY KEY (id),
    CONSTRAINT inbox_messages_content_id_fkey FOREIGN KEY (content_id) REFERENCES inbox_contents(id),
    CONSTRAINT inbox_messages_scope_check1 CHECK ((scope = lower(scope)))
);
CREATE INDEX inbox_messages_content ON public.inbox_messages USING btree (content_id);
CREATE INDEX inbox_messages_received ON public.inbox_messages USING btree (received_at);
CREATE INDEX inbox_messages_scope ON public.inbox_messages USING btree (scope, id);

CREATE TABLE inbox_usage_deltas (
    bytes bigint NOT NULL
);

CREATE TABLE email_changes (
    user_id    bigint NOT NULL,
    version    integer NOT NULL,
    old_email  text NOT NULL,
    new_email  text NOT NULL,
    changed_at timestamp with time zone NOT NULL,
    ended_at   timestamp with time zone,
    ended_by   text,
    CONSTRAINT email_changes_pkey PRIMARY KEY (user_id, version),
    CONSTRAINT email_changes_user_id_fkey FOREIGN KEY (user_id) REFERENCES users(id) ON DELETE CASCADE,
    CONSTRAINT email_changes_ended CHECK (((ended_at IS NULL) = (ended_by IS NULL))),
    CONSTRAINT email_changes_ended_by_check CHECK ((ended_by = ANY (ARRAY['undone'::text, 'voided'::text])))
);
CREATE INDEX email_changes_standing_old_email ON public.email_changes USING btree (old_email) WHERE (ended_at IS NULL);

CREATE TABLE deleted_accounts (
    user_id        bigint NOT NULL,
    address_digest text NOT NULL,
    deleted_at     timestamp with time zone NOT NULL,
    deleted_by     text NOT NULL,
    CONSTRAINT deleted_accounts_pkey PRIMARY KEY (user_id),
    CONSTRAINT deleted_accounts_deleted_by_check CHECK ((deleted_by = ANY (ARRAY['owner'::text, 'operator'::text, 'retired'::text])))
);
CREATE INDEX deleted_accounts_digest ON public.deleted_accounts USING btree (address_digest);

CREATE TABLE inbox_faults (
    scope      text NOT NULL,
    reply      text NOT NULL,
    remaining  integer NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT inbox_faults_pkey PRIMARY KEY (scope),
    CONSTRAINT inbox_faults_remaining_check CHECK (((remaining >= 0) AND (remaining <= 100))),
    CONSTRAINT inbox_faults_reply_check CHECK ((reply ~ '^[45][0-9][0-9]( [ -~]{0,200})?$'::text)),
    CONSTRAINT inbox_faults_scope_check CHECK ((scope = lower(scope)))
);

CREATE TABLE operators (
    user_id        bigint NOT NULL,
    code_version   integer DEFAULT 0 NOT NULL,
    added_at       timestamp with time zone DEFAULT now() NOT NULL,
    totp_secret    bytea,
    totp_last_step bigint DEFAULT 0 NOT NULL,
    CONSTRAINT operators_pkey PRIMARY KEY (user_id),
    CONSTRAINT operators_user_id_fkey FOREIGN KEY (user_id) REFERENCES users(id) ON DELETE CASCADE
);

CREATE TABLE console_sign_ins (
    token_hash   bytea NOT NULL,
    user_id      bigint NOT NULL,
    code_version integer NOT NULL,
    issued_at    timestamp with time zone NOT NULL,
    wrong_codes  integer DEFAULT 0 NOT NULL,
    CONSTRAINT console_sign_ins_pkey PRIMARY KEY (token_hash),
    CONSTRAINT console_sign_ins_user_id_fkey FOREIGN KEY (user_id) REFERENCES operators(user_id) ON DELETE CASCADE
);
CREATE INDEX console_sign_ins_user ON public.console_sign_ins USING btree (user_id);

CREATE TABLE console_sessions (
    id           bigint DEFAULT unordered_id() NOT NULL,
    token_hash   bytea NOT NULL,
    user_id      bigint NOT NULL,
    created_at   timestamp with time zone NOT NULL,
    last_seen_at timestamp with time zone NOT NULL,
    user_agent   text DEFAULT ''::text NOT NULL,
    CONSTRAINT console_sessions_pkey PRIMARY KEY (id),
    CONSTRAINT console_sessions_token_hash_key UNIQUE (token_hash),
    CONSTRAINT console_sessions_user_id_fkey FOREIGN KEY (user_id) REFERENCES operators(user_id) ON DELETE CASCADE
);
CREATE INDEX console_sessions_user ON public.console_sessions USING btree (user_id);

CREATE TABLE operator_log (
    id             bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    operator_id    bigint,
    operator_email text NOT NULL,
    action         text NOT NULL,
    target         text DEFAULT ''::text NOT NULL,
    detail         text DEFAULT ''::text NOT NULL,
    created_at     timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT operator_log_pkey PRIMARY KEY (id)
);
CREATE INDEX operator_log_created ON public.operator_log USING btree (created_at DESC, id DESC);

CREATE TABLE app_templates (
    app_id     uuid NOT NULL,
    kind       text NOT NULL,
    locale     text NOT NULL,
    subject    text NOT NULL,
    text_body  text NOT NULL,
    html_body  text NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT app_templates_pkey PRIMARY KEY (app_id, kind, locale),
    CONSTRAINT app_templates_app_id_fkey FOREIGN KEY (app_id) REFERENCES apps(id) ON DELETE CASCADE,
    CONSTRAINT app_templates_kind CHECK ((kind = ANY (ARRAY['verify'::text, 'reset'::text, 'sign_in'::text, 'email_change'::text, 'account_delete'::text]))),
    CONSTRAINT app_templates_locale_length CHECK (((length(locale) >= 2) AND (length(locale) <= 35))),
    CONSTRAINT app_templates_size CHECK ((((octet_length(subject) + octet_length(text_body)) + octet_length(html_body)) <= 65536))
);

-- Functions

CREATE OR REPLACE FUNCTION public.account_belongs_to_app(account bigint, app uuid)
 RETURNS boolean
 LANGUAGE sql
 STABLE PARALLEL SAFE
RETURN (EXISTS (SELECT 1 FROM (account_apps m JOIN users u ON ((u.id = m.user_id))) WHERE ((m.user_id = account_belongs_to_app.account) AND (m.app_id = account_belongs_to_app.app) AND ((u.email_verified_at IS NOT NULL) OR (u.signup_count = 1)))));

CREATE OR REPLACE FUNCTION public.app_delivers_mail_to(account bigint, app uuid, address text)
 RETURNS boolean
 LANGUAGE sql
 STABLE PARALLEL SAFE
RETURN ((EXISTS (SELECT 1 FROM (users u JOIN account_apps m ON (((m.user_id = u.id) AND (m.app_id = app_delivers_mail_to.app)))) WHERE ((u.id = app_delivers_mail_to.account) AND (u.email = app_delivers_mail_to.address) AND (u.email_verified_at IS NOT NULL)))) AND (NOT (EXISTS (SELECT 1 FROM account_apps other WHERE ((other.user_id = app_delivers_mail_to.account) AND (other.app_id <> app_delivers_mail_to.app))))));

CREATE OR REPLACE FUNCTION public.app_event_payload(event_type text, happened_at timestamp with time zone, data jsonb)
 RETURNS jsonb
 LANGUAGE sql
RETURN jsonb_build_object('webhook_id', ('evt_'::text || replace((gen_random_uuid())::text, '-'::text, ''::text)), 'event', jsonb_build_object('type', event_type, 'timestamp', to_char((happened_at AT TIME ZONE 'UTC'::text), 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'::text), 'data', data));

CREATE OR REPLACE FUNCTION public.inbox_count_contents()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO inbox_usage_deltas (bytes)
        SELECT sum(stored_bytes) FROM new_contents HAVING count(*) > 0;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO inbox_usage_deltas (bytes)
        SELECT -sum(stored_bytes) FROM old_contents HAVING count(*) > 0;
    ELSE
        INSERT INTO inbox_usage_deltas (bytes)
        SELECT coalesce((SELECT sum(stored_bytes) FROM new_contents), 0)
             - coalesce((SELECT sum(stored_bytes) FROM old_contents), 0);
    END IF;
    RETURN NULL;
END $function$;

CREATE OR REPLACE FUNCTION public.inbox_free_contents()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    DELETE FROM inbox_contents AS c
    WHERE c.id IN (SELECT content_id FROM gone_messages)
      AND NOT EXISTS (SELECT 1 FROM inbox_messages AS m WHERE m.content_id = c.id);
    RETURN NULL;
END $function$;

CREATE OR REPLACE FUNCTION public.inbox_search_matches(in_scope text, in_recipients text[], in_from text, in_subject text, in_text text, to_patterns text[], from_patterns text[], subject_patterns text[], word_patterns text[])
 RETURNS boolean
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE COST 1000
AS $function$
DECLARE
    pattern text;
    -- No pattern holds a newline (a query is one line), so none matches across two addresses.
    recipients text := array_to_string(in_recipients, E'\n');
BEGIN
    FOREACH pattern IN ARRAY to_patterns LOOP
        IF recipients NOT ILIKE pattern THEN
            RETURN false;
        END IF;
    END LOOP;
    FOREACH pattern IN ARRAY from_patterns LOOP
        IF coalesce(in_from, '') NOT ILIKE pattern THEN
            RETURN false;
        END IF;
    END LOOP;
    FOREACH pattern IN ARRAY subject_patterns LOOP
        IF coalesce(in_subject, '') NOT ILIKE pattern THEN
            RETURN false;
        END IF;
    END LOOP;
    FOREACH pattern IN ARRAY word_patterns LOOP
        IF NOT (coalesce(in_subject, '') ILIKE pattern OR coalesce(in_from, '') ILIKE pattern
                OR in_scope ILIKE pattern OR recipients ILIKE pattern
                OR coalesce(in_text, '') ILIKE pattern) THEN
            RETURN false;
        END IF;
    END LOOP;
    RETURN true;
END $function$;

CREATE OR REPLACE FUNCTION public.inbox_visible_messages(in_scope text, in_since bigint, in_retention_seconds double precision, in_to text, in_subject text, in_q text)
 RETURNS TABLE(id bigint, scope text, recipients text[], received_at timestamp with time zone, mail_from text, subject text, message_id text, headers jsonb, links text[], raw bytea, text_body text, html_body text, code text)
 LANGUAGE sql
 STABLE
AS $function$
    SELECT m.id, m.scope, m.recipients, m.received_at,
           c.mail_from, c.subject, c.message_id, c.headers, c.links,
           c.raw, c.text_body, c.html_body, c.code
    FROM inbox_messages AS m
    JOIN inbox_contents AS c ON c.id = m.content_id
    WHERE m.scope = in_scope AND m.id > in_since
      AND m.received_at > now() - make_interval(secs => in_retention_seconds)
      AND (in_to IS NULL
           OR EXISTS (SELECT 1 FROM unnest(m.recipients) AS r WHERE r ILIKE in_to))
      AND (in_subject IS NULL OR c.subject ILIKE in_subject)
      AND (in_q IS NULL OR c.subject ILIKE in_q OR c.mail_from ILIKE in_q
           OR c.text_body ILIKE in_q
           OR EXISTS (SELECT 1 FROM unnest(m.recipients) AS r WHERE r ILIKE in_q))
$function$;

CREATE OR REPLACE FUNCTION public.link_version(account users, purpose text)
 RETURNS integer
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
SELECT CASE purpose
    WHEN 'reset' THEN account.reset_version
    WHEN 'verify' THEN account.verify_version
    WHEN 'email_change' THEN account.email_change_version
    WHEN 'email_change_approval' THEN account.email_change_version
    WHEN 'account_delete' THEN account.account_delete_version
    WHEN 'sign_in' THEN account.sign_in_version
END
$function$;

CREATE OR REPLACE FUNCTION public.job_link_current(job_purpose text, job_user bigint, job_version integer)
 RETURNS TABLE(current_version integer, is_current boolean)
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
SELECT v.version, job_purpose IS NULL OR job_version IS NOT DISTINCT FROM v.version
FROM (SELECT CASE
          WHEN job_purpose IS NULL THEN NULL
          WHEN job_purpose = 'email_revert' THEN
              (SELECT c.version FROM email_changes AS c
               WHERE c.user_id = job_user AND c.version = job_version AND c.ended_at IS NULL)
          WHEN job_purpose = 'console_login' THEN
              (SELECT o.code_version FROM operators AS o WHERE o.user_id = job_user)
          ELSE (SELECT link_version(u, job_purpose) FROM users AS u WHERE u.id = job_user)
      END AS version) AS v
$function$;

CREATE OR REPLACE FUNCTION public.operators_drop_role_on_new_address()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    WITH dropped AS (
        DELETE FROM operators WHERE user_id = NEW.id RETURNING user_id
    )
    INSERT INTO operator_log (operator_id, operator_email, action, target, detail)
    SELECT NULL, 'authsvc', 'operator.role_dropped', 'account ' || user_id,
           'the account''s address changed'
    FROM dropped;
    RETURN NULL;
END $function$;

CREATE OR REPLACE FUNCTION public.outbox_counter_totals()
 RETURNS TABLE(name text, total bigint, seconds double precision)
 LANGUAGE sql
 STABLE
AS $function$
    SELECT name, sum(total)::bigint, sum(seconds)::float8
    FROM (
        SELECT name, total, seconds FROM outbox_counters
        UNION ALL
        SELECT name, delta, seconds FROM outbox_counter_deltas
    ) AS counted
    GROUP BY name
$function$;

CREATE OR REPLACE FUNCTION public.outbox_delete_trails()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    DELETE FROM email_job_events WHERE job_id IN (SELECT id FROM old_jobs);
    RETURN NULL;
END $function$;

CREATE OR REPLACE FUNCTION public.outbox_job_due(status text, next_attempt_at timestamp with time zone, lease_expires_at timestamp with time zone)
 RETURNS boolean
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
    SELECT status = 'pending' AND next_attempt_at <= now()
       AND (lease_expires_at IS NULL OR lease_expires_at <= now())
$function$;

CREATE OR REPLACE FUNCTION public.outbox_job_leased(status text, lease_expires_at timestamp with time zone)
 RETURNS boolean
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
    SELECT status = 'pending' AND lease_expires_at > now()
$function$;

CREATE OR REPLACE FUNCTION public.outbox_latency_bounds()
 RETURNS double precision[]
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$ SELECT '{0.05,0.1,0.25,0.5,1,2.5,5,10,30,60,300}'::float8[] $function$;

CREATE OR REPLACE FUNCTION public.rate_limit_hit(counted_bucket text, counted_window timestamp with time zone, counted_limit integer, wait_for_disk boolean)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
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
END $function$;

CREATE OR REPLACE FUNCTION public.email_budget_hit(budget_bucket text, budget_window timestamp with time zone, budget_limit integer, tries_purpose text, tries_digest bytea)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
DECLARE
    allowed boolean;
BEGIN
    allowed := rate_limit_hit(budget_bucket, budget_window, budget_limit, true);
    IF allowed THEN
        DELETE FROM code_attempts
        WHERE purpose = tries_purpose AND address_digest = tries_digest;
    END IF;
    RETURN allowed;
END $function$;

CREATE OR REPLACE FUNCTION public.redact_addresses(body text, addresses text[], stand_ins text[])
 RETURNS text
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
AS $function$
BEGIN
    FOR i IN 1 .. coalesce(array_length(addresses, 1), 0) LOOP
        body := regexp_replace(body, '***=' || addresses[i], stand_ins[i], 'gi');
    END LOOP;
    RETURN body;
END $function$;

-- Triggers

CREATE TRIGGER operators_follow_address AFTER UPDATE OF email ON users
    FOR EACH ROW WHEN (old.email IS DISTINCT FROM new.email)
    EXECUTE FUNCTION operators_drop_role_on_new_address();

CREATE TRIGGER outbox_delete_trails AFTER DELETE ON email_jobs
    REFERENCING OLD TABLE AS old_jobs
    FOR EACH STATEMENT
    EXECUTE FUNCTION outbox_delete_trails();

CREATE TRIGGER inbox_count_deleted_contents AFTER DELETE ON inbox_contents
    REFERENCING OLD TABLE AS old_contents
    FOR EACH STATEMENT
    EXECUTE FUNCTION inbox_count_contents();
CREATE TRIGGER inbox_count_inserted_contents AFTER INSERT ON inbox_contents
    REFERENCING NEW TABLE AS new_contents
    FOR EACH STATEMENT
    EXECUTE FUNCTION inbox_count_contents();
CREATE TRIGGER inbox_count_updated_contents AFTER UPDATE ON inbox_contents
    REFERENCING OLD TABLE AS old_contents NEW TABLE AS new_contents
    FOR EACH STATEMENT
    EXECUTE FUNCTION inbox_count_contents();

CREATE TRIGGER inbox_free_deleted_contents AFTER DELETE ON inbox_messages
    REFERENCING OLD TABLE AS gone_messages
    FOR EACH STATEMENT
    EXECUTE FUNCTION inbox_free_contents();
