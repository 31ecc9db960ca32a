-- authsvc's schema in one migration: the baseline.
--
-- Up to release 0.1.0 the schema grew file by file, 0001 to 0026, and those
-- files kept every superseded body of the same rules (the outbox counters'
-- triggers were rewritten four times, then dropped) and conversions of data
-- that no database needs any more. This file builds what they built, table
-- for table and function for function, and nothing else. It takes the number
-- of the last of them: an installation that applied 0026 has nothing to do,
-- and a new database gets 0000 and then this file. authsvc/db/migrate.py
-- refuses a database that recorded older versions only (upgrade it with the
-- previous release first, docs/OPERATIONS.md); the old files are in the
-- history (`git log -- migrations/`). Migrations after this one start at 0027.
--
-- Core PostgreSQL only: no extensions (the embedded server ships none).
-- migrations/schema.sql is the schema as every migration leaves it, generated.
--
-- THE OUTBOX IN BRIEF (migrations/schema.sql's header has the full table: who
-- makes each move and what each trail event means). A job is an email (kind
-- 'email') or an app event for an app's webhook (kind 'webhook'):
--
--   queue     (new) -> pending      by web and API, in the transaction of the
--                                   change that needs the email or event
--   claim     pending -> claimed    by a worker; "claimed" is not a status but
--                                   pending with a live lease (lease_owner set,
--                                   lease_expires_at ahead), due again when the
--                                   lease runs out, so a dead worker's job is
--                                   taken by another (events_lease_expired)
--   outcome   claimed -> sent, failed, superseded, expired or suppressed:
--                                   final, recorded only by the lease's holder
--   retry, ambiguous, release
--             claimed -> pending    a transient failure, a send that may have
--                                   arrived (once; twice fails the job), or
--                                   handed back unsent
--   redrive   failed -> pending     an operator: `authsvc outbox redrive`
--   prune     final -> deleted      an operator: `authsvc outbox prune`
--
-- Each move writes its audit-trail row (email_job_events) and its counter
-- deltas (outbox_counter_deltas) in the statement that makes it.
--
-- The groups below, in order: users and sessions; tokens, codes and limits;
-- apps; the outbox, its trail and counters; app events; suppressions; the
-- test inbox.


-- =========================================================================
-- USERS AND SESSIONS (authsvc/accounts)
-- =========================================================================

-- A random positive id below 2^53, for ids an outsider sees: an ordered id
-- in a link or a page would count everyone's signups and logins. Below 2^53
-- so a JSON number carries it exactly in every language (the API's user.id).
-- The bits come from gen_random_uuid(), the strong source: random() is a
-- per-connection PRNG whose state a few of one's own ids could reveal. The
-- n-th row collides with odds n / 9.0e15; the loser's INSERT fails.
CREATE FUNCTION unordered_id() RETURNS bigint
LANGUAGE sql VOLATILE
RETURN ((('x' || substr(md5(gen_random_uuid()::text), 1, 14))::bit(56)::bigint >> 3)
        % 9007199254740991) + 1;

CREATE TABLE users (
    id                  bigint PRIMARY KEY DEFAULT unordered_id(),
    email               text NOT NULL,
    password_hash       text NOT NULL,
    email_verified_at   timestamptz,
    -- The only valid link per purpose carries the current version; issuing a
    -- link or redeeming one bumps it, which retires every older link.
    reset_version       integer NOT NULL DEFAULT 0,
    verify_version      integer NOT NULL DEFAULT 0,
    password_changed_at timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    -- Signups received while the address was unconfirmed (a verification
    -- resend counts as another). Two or more make the address contested:
    -- whoever confirms it must choose the password then, since nobody can
    -- tell whether the stored one came from the mailbox's holder (SPEC §4a).
    signup_count        integer NOT NULL DEFAULT 1,
    -- The application normalises (authsvc/accounts/addresses.py); the check
    -- makes a missed path fail loudly.
    CONSTRAINT users_email_normalised CHECK (email = lower(btrim(email))),
    CONSTRAINT users_email_length CHECK (length(email) BETWEEN 3 AND 254)
);
CREATE UNIQUE INDEX users_email_key ON users (email);

-- Web sessions live here, not in the cookie: the cookie carries a random
-- token, this table only its SHA-256. Logout deletes the row, so a copied
-- cookie stops working; a password change deletes all of the user's rows.
CREATE TABLE web_sessions (
    id           bigint PRIMARY KEY DEFAULT unordered_id(),  -- in the /account page's forms
    token_hash   bytea NOT NULL UNIQUE,
    user_id      bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,
    user_agent   text NOT NULL DEFAULT '' CHECK (length(user_agent) <= 300)
);
CREATE INDEX web_sessions_user ON web_sessions (user_id, created_at);


-- =========================================================================
-- TOKENS, CODES AND LIMITS (authsvc/accounts, authsvc/ratelimit.py)
-- =========================================================================

-- One row per redeemed link, so a stale link can say "already used" rather
-- than "replaced by a newer one".
CREATE TABLE token_redemptions (
    user_id     bigint NOT NULL REFERENCES users (id),
    purpose     text NOT NULL CHECK (purpose IN ('reset', 'verify')),
    version     integer NOT NULL,
    redeemed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, purpose, version)
);

-- Wrong tries of the 6-digit code beside each link (the code itself is
-- derived from the link's claims, never stored). Five retire the code; the
-- link keeps working. Keyed by a digest of the address, not by the user, so
-- an address without an account is counted exactly like one with an
-- account, and per address rather than per code: only an email its budget
-- allows starts the tries afresh (email_budget_hit below), so the answer to
-- a wrong code follows from the requests alone and tells nobody which
-- address has an account (tests/test_security_code_sequences.py). The count
-- is taken before the code is checked, so concurrent guesses cannot pass it.
CREATE TABLE code_attempts (
    purpose        text NOT NULL CHECK (purpose IN ('reset', 'verify')),
    address_digest bytea NOT NULL,
    attempts       integer NOT NULL CHECK (attempts >= 0),
    created_at     timestamptz NOT NULL,
    PRIMARY KEY (purpose, address_digest)
);
CREATE INDEX code_attempts_created ON code_attempts (created_at);

-- Fixed-window counters for every rate limit, shared by every process and
-- host; the keys are hashed, so no address is stored here.
CREATE TABLE rate_limit_counters (
    bucket       text NOT NULL,
    window_start timestamptz NOT NULL,
    hits         integer NOT NULL,
    PRIMARY KEY (bucket, window_start)
);

-- "Count one event, and is it within the limit?", so a statement that does
-- something else can count as it goes (an API call's key lookup, a link
-- request: one round trip each); the upsert and the "within" rule are
-- written once, here. True while the window's total, this event included,
-- is at most counted_limit. With wait_for_disk false the caller's commit
-- does not wait for its WAL flush (this transaction only), so it is for a
-- statement that is its own transaction: authsvc/ratelimit.py
-- check_own_transaction refuses it anywhere else. PL/pgSQL, not SQL: a SQL
-- function that writes is never inlined and is planned at every call.
-- Measured (bench/rules_in_plpgsql.py): without the disk wait one call
-- (~0.3 ms median) beats the readable statements (BEGIN; SET LOCAL; INSERT;
-- COMMIT) 1.7-2.1x direct and 2-4.7x through PgBouncer; with it, they tie.
CREATE FUNCTION rate_limit_hit(counted_bucket text, counted_window timestamptz,
                               counted_limit integer, wait_for_disk boolean)
RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
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
END $$;

-- One email to an address, counted against its budget; within the budget
-- the address's code tries start afresh: the email allowed now carries a new
-- code, or would, had the address an account to send it to. Either way five
-- fresh tries, so the two stay indistinguishable; over the budget nothing
-- changes. Signups (authsvc/accounts/code_tries.sql) and link requests
-- (outbox/producer.sql queue_link) both call it: one rule, written once.
-- Measured (bench/rules_in_plpgsql.py): within the budget, count-then-DELETE
-- from Python takes 1.2x (prepared), 1.65x (unprepared) and ~2x (PgBouncer)
-- one call (0.2-0.5 ms), and one CTE statement 1.5x unprepared (replanned
-- each call); about 1% of a signup with argon2, more under a pooler.
CREATE FUNCTION email_budget_hit(budget_bucket text, budget_window timestamptz,
                                 budget_limit integer, tries_purpose text,
                                 tries_digest bytea)
RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    allowed boolean;
BEGIN
    allowed := rate_limit_hit(budget_bucket, budget_window, budget_limit, true);
    IF allowed THEN
        DELETE FROM code_attempts
        WHERE purpose = tries_purpose AND address_digest = tries_digest;
    END IF;
    RETURN allowed;
END $$;


-- =========================================================================
-- APPS (authsvc/apps): the apps that embed authsvc, and whose account is whose
-- =========================================================================

-- Only a SHA-256 of the API key is kept: keys are 256-bit random strings, so
-- a slow hash would add latency and no safety. webhook_secret is the app's
-- whsec_ secret sealed with AES-GCM under a key derived from
-- AUTHSVC_SECRET_KEYS: the worker must recover it to sign, so it cannot be
-- hashed, and a dump alone does not reveal it. A revoked app's key stops
-- working and its pending deliveries fail; the row stays for the outbox's
-- history.
CREATE TABLE apps (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name           text NOT NULL,
    key_hash       bytea NOT NULL UNIQUE,
    redirect_urls  text[] NOT NULL DEFAULT '{}',
    created_at     timestamptz NOT NULL DEFAULT now(),
    webhook_url    text,
    webhook_secret bytea,
    revoked_at     timestamptz,
    CONSTRAINT apps_name_length CHECK (length(name) BETWEEN 1 AND 100),
    CONSTRAINT apps_webhook_has_secret CHECK (webhook_url IS NULL OR webhook_secret IS NOT NULL)
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

-- Whose account is it (SPEC §14, docs/SECURITY.md "Whose account")? An app's
-- redirect_url takes effect only for its own accounts: any app key could
-- otherwise ask a reset for another app's account with its own redirect, and
-- the holder would get a genuine email whose link is on that app's site. A
-- row is written by the signup that created the account through the app; it
-- counts only while the address is unproven and uncontested, and the first
-- proof keeps it only when the proving email was that app's own (the job's
-- payload says "own_account"). So completing a flow never makes an app a
-- member, and an app can neither claim an address by signing it up first
-- nor take an account by superseding the real app's email.
CREATE TABLE account_apps (
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    app_id  uuid NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    since   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, app_id)
);

-- The one rule every request that takes a redirect_url asks (authsvc/apps/
-- account_apps.sql for signups, outbox/producer.sql queue_link for link
-- requests): a member's row counts for a proven address, and for an unproven
-- one only while it is uncontested. Plain SQL, so the planner inlines it.
CREATE FUNCTION account_belongs_to_app(account bigint, app uuid) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
RETURN EXISTS (
    SELECT 1 FROM account_apps AS m JOIN users AS u ON u.id = m.user_id
    WHERE m.user_id = account AND m.app_id = app
      AND (u.email_verified_at IS NOT NULL OR u.signup_count = 1)
);


-- =========================================================================
-- THE OUTBOX (authsvc/outbox, authsvc/worker): jobs, their trail, their counters
-- =========================================================================

-- The transactional outbox: the web side commits a job with the change that
-- needs it, and the worker sends it. A row carries the token version and
-- issued_at, never a usable token: the worker mints the signed link when it
-- sends. kind 'webhook' (app events, below) holds the event type in
-- template, the webhook URL at queue time in recipient and the event in
-- payload; the claim, lease, retry and trail are the emails' own. app_id on
-- an email names the app whose API call queued it, whose events it gets.
-- id is ordered and internal (claims, trails, `authsvc outbox`); what leaves
-- authsvc (Message-ID, X-Authsvc-Job, email.* events) is public_id, random,
-- so the gap between two emails in one's own mailbox cannot tell whether a
-- reset queued one for someone else's address. It is fixed at queue time, so
-- every re-send carries the same one (and the same provider idempotency
-- key). Nullable: jobs that ended before it existed have none, and a redrive
-- gives one (outbox/admin.sql redrive_job). No index: only `authsvc outbox
-- show` looks a job up by it, and a random-uuid index would cost every insert.
CREATE TABLE email_jobs (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    template            text NOT NULL,
    recipient           text NOT NULL,
    payload             jsonb NOT NULL DEFAULT '{}',
    status              text NOT NULL DEFAULT 'pending'
                        CHECK (status IN ('pending', 'sent', 'failed', 'superseded', 'expired',
                                          'suppressed')),
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
    kind                text NOT NULL DEFAULT 'email' CHECK (kind IN ('email', 'webhook')),
    app_id              uuid REFERENCES apps (id),
    public_id           uuid DEFAULT gen_random_uuid(),
    CONSTRAINT email_jobs_token_fields CHECK (
        (purpose IS NULL) = (token_version IS NULL) AND (purpose IS NULL) = (issued_at IS NULL)
    ),
    CONSTRAINT email_jobs_template_check CHECK (
        (kind = 'email' AND template IN ('verify', 'reset', 'account_exists', 'password_changed'))
        OR (kind = 'webhook' AND app_id IS NOT NULL
            AND template IN ('user.verified', 'user.password_changed',
                             'email.delivered', 'email.failed'))
    )
);
-- Serves the claim: only pending rows, in due order. A claim moves
-- next_attempt_at to its lease's end, so a crashed worker's row becomes due
-- again exactly when its lease runs out.
CREATE INDEX email_jobs_due ON email_jobs (next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX email_jobs_status_created ON email_jobs (status, created_at);
CREATE INDEX email_jobs_user ON email_jobs (user_id);

-- The outbox's one definition of "due" and "leased": the claim
-- (worker/jobs.sql), `authsvc outbox stats` and /metrics all call these, so
-- a dead worker's expired lease counts as due everywhere exactly when the
-- claim would take it. Plain SQL of the row's columns, STABLE and not
-- STRICT, so the planner inlines them and the claim still walks the partial
-- index email_jobs_due (tests/test_outbox_rules.py checks the plan).
CREATE FUNCTION outbox_job_due(status text, next_attempt_at timestamptz,
                               lease_expires_at timestamptz)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT status = 'pending' AND next_attempt_at <= now()
       AND (lease_expires_at IS NULL OR lease_expires_at <= now())
$$;

CREATE FUNCTION outbox_job_leased(status text, lease_expires_at timestamptz)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT status = 'pending' AND lease_expires_at > now()
$$;

-- The audit trail: what happened to each job, appended by the statement that
-- made it happen. event takes only these names (schema.sql's header says
-- what each means and who writes it; tests/test_schema_file.py holds
-- worker/jobs.py's OUTCOME_EVENTS to this list).
-- No foreign key to email_jobs: it checked every trail row with a query of
-- its own (two rows per email), and every writer takes its job ids from
-- email_jobs rows it has just updated, under their row locks, so the check
-- could never fail. What its ON DELETE CASCADE did is the trigger below.
CREATE TABLE email_job_events (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id              bigint NOT NULL,
    event               text NOT NULL CHECK (event IN (
        'claimed',                                                -- a worker took a lease
        'sent', 'failed', 'superseded', 'expired', 'suppressed',  -- final: the job's new status
        'retry', 'ambiguous', 'released',                         -- back to pending
        'lease_lost',                                             -- an outcome recorded too late
        'redriven'                                                -- an operator's second chance
    )),
    lease_owner         text,
    lease_expires_at    timestamptz,
    attempt             integer,
    token_version       integer,
    provider_message_id text,
    error               text,
    created_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX email_job_events_job ON email_job_events (job_id, id);
-- The claim asks, per job, whether an earlier attempt ended ambiguous;
-- without this index that was a scan of the whole trail. Ambiguous sends
-- are rare, so it is tiny.
CREATE INDEX email_job_events_ambiguous ON email_job_events (job_id) WHERE event = 'ambiguous';

-- A deleted job takes its trail with it, whoever deletes it (prune, an
-- operator), in one statement per delete.
CREATE FUNCTION outbox_delete_trails() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM email_job_events WHERE job_id IN (SELECT id FROM old_jobs);
    RETURN NULL;
END $$;

CREATE TRIGGER outbox_delete_trails AFTER DELETE ON email_jobs
    REFERENCING OLD TABLE AS old_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_delete_trails();

-- The outbox's figures (`authsvc outbox stats`, /metrics) at any table size.
-- The pending side (pending, due, leased, oldest) is counted live over the
-- pending rows; the rest are counters: jobs_<final status> (rows of that
-- status now), events_<event> and events_lease_expired (since install;
-- prune does not lower them), send_latency_bucket_<b> (sends within b
-- seconds of queueing, above the bound below b) and send_latency (count and
-- seconds). The statements that change the outbox append what they changed
-- to outbox_counter_deltas, in the same statement (worker/jobs.sql
-- claim_batch and record_outcomes, outbox/admin.sql redrive_job and
-- prune_jobs): insert-only, so writers never wait on each other or on a
-- read. Every worker folds the deltas into outbox_counters about once a
-- second (outbox/admin.sql fold_counters); a read never folds. A hand-made
-- UPDATE of email_jobs is not counted: `authsvc outbox recount` repairs it.
-- docs/worker.md, "Where the figures come from".
CREATE TABLE outbox_counters (
    name    text PRIMARY KEY,
    total   bigint NOT NULL DEFAULT 0,
    seconds float8 NOT NULL DEFAULT 0
);

CREATE TABLE outbox_counter_deltas (
    name    text NOT NULL,
    delta   bigint NOT NULL,
    seconds float8 NOT NULL DEFAULT 0
);

-- The latency histogram's bounds: authsvc/observability/metrics.py
-- LATENCY_BOUNDS must match.
CREATE FUNCTION outbox_latency_bounds() RETURNS float8[] LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT '{0.05,0.1,0.25,0.5,1,2.5,5,10,30,60,300}'::float8[] $$;

-- Every counter's total now: folded, plus the deltas not yet folded, in one
-- snapshot, so a read sees a fold entirely or not at all and never goes
-- back. A SQL function of one SELECT: the planner inlines it.
CREATE FUNCTION outbox_counter_totals() RETURNS TABLE (name text, total bigint, seconds float8)
LANGUAGE sql STABLE AS $$
    SELECT name, sum(total)::bigint, sum(seconds)::float8
    FROM (
        SELECT name, total, seconds FROM outbox_counters
        UNION ALL
        SELECT name, delta, seconds FROM outbox_counter_deltas
    ) AS counted
    GROUP BY name
$$;


-- =========================================================================
-- APP EVENTS (authsvc/app_events): webhook deliveries ride the outbox
-- =========================================================================

-- An app event's stored envelope, built in one place for the web side's
-- events (app_events/producer.sql queue_event) and the worker's email.* events
-- (worker/jobs.sql record_outcomes). The webhook id is fixed here, at queue
-- time, so every retry of the delivery carries the same one.
CREATE FUNCTION app_event_payload(event_type text, happened_at timestamptz, data jsonb)
RETURNS jsonb LANGUAGE sql VOLATILE
RETURN jsonb_build_object(
    'webhook_id', 'evt_' || replace(gen_random_uuid()::text, '-', ''),
    'event', jsonb_build_object(
        'type', event_type,
        -- RFC 3339 in UTC with milliseconds, e.g. 2026-12-01T21:01:20.123Z.
        'timestamp', to_char(happened_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
        'data', data));


-- =========================================================================
-- SUPPRESSIONS (authsvc/bounces): bounces and complaints
-- =========================================================================

-- An address a provider reported as hard-bounced or complaining gets no more
-- mail: the worker ends its later jobs 'suppressed' instead of sending. Only
-- an operator lifts it (`authsvc suppressions remove ADDRESS`).
CREATE TABLE suppressions (
    address             text PRIMARY KEY,  -- canonical form (authsvc/accounts/addresses.py)
    event               text NOT NULL,     -- e.g. email.bounced, email.complained
    provider            text NOT NULL,
    provider_message_id text,              -- the provider's id of the message it reported
    detail              text,
    suppressed_at       timestamptz NOT NULL DEFAULT now()
);

-- Provider webhook message ids already processed, so a captured delivery
-- cannot be replayed; kept well past the signature's five-minute tolerance.
CREATE TABLE provider_webhook_messages (
    provider     text NOT NULL,
    message_id   text NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, message_id)
);
CREATE INDEX provider_webhook_messages_received ON provider_webhook_messages (received_at);


-- =========================================================================
-- THE TEST INBOX (authsvc/inbox): only written when AUTHSVC_TEST_INBOX is on
-- =========================================================================

-- A message is stored once per SMTP transaction (the raw bytes and what was
-- parsed from them), however many scopes it went to: stored once per scope,
-- 1 MiB to 100 scopes took 217 MB.
CREATE TABLE inbox_contents (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    mail_from    text,
    subject      text,
    message_id   text,
    headers      jsonb NOT NULL DEFAULT '{}',
    text_body    text,
    html_body    text,
    links        text[] NOT NULL DEFAULT '{}',
    raw          bytea NOT NULL,
    -- What the byte budget counts: the raw bytes and the parsed bodies beside them.
    stored_bytes bigint GENERATED ALWAYS AS (
        octet_length(raw)::bigint + coalesce(octet_length(text_body), 0)
        + coalesce(octet_length(html_body), 0)
    ) STORED
);

-- One row per scope a message went to, pointing at its content; clients page
-- with since=<id>, so ids are ordered (nothing outside the inbox sees them).
-- The scope check keeps the name it was first given (_check1): a later
-- migration may name it, and must find the same name everywhere.
CREATE TABLE inbox_messages (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope       text NOT NULL CONSTRAINT inbox_messages_scope_check1 CHECK (scope = lower(scope)),
    recipients  text[] NOT NULL,
    content_id  bigint NOT NULL REFERENCES inbox_contents (id),
    received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX inbox_messages_scope ON inbox_messages (scope, id);
CREATE INDEX inbox_messages_received ON inbox_messages (received_at);
CREATE INDEX inbox_messages_content ON inbox_messages (content_id);

-- Bytes the contents take, for the sink's byte budget
-- (AUTHSVC_TEST_INBOX_MAX_BYTES): the sum of the rows is the figure.
-- Insert-only deltas, as the outbox counters, so concurrent stores never
-- wait on one hot row; the sink folds them (inbox/messages.sql fold_inbox_usage).
CREATE TABLE inbox_usage_deltas (bytes bigint NOT NULL);

-- Kept by the contents' own triggers, so every writer is counted.
CREATE FUNCTION inbox_count_contents() RETURNS trigger LANGUAGE plpgsql AS $$
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
END $$;
CREATE TRIGGER inbox_count_inserted_contents AFTER INSERT ON inbox_contents
    REFERENCING NEW TABLE AS new_contents
    FOR EACH STATEMENT EXECUTE FUNCTION inbox_count_contents();
CREATE TRIGGER inbox_count_updated_contents AFTER UPDATE ON inbox_contents
    REFERENCING OLD TABLE AS old_contents NEW TABLE AS new_contents
    FOR EACH STATEMENT EXECUTE FUNCTION inbox_count_contents();
CREATE TRIGGER inbox_count_deleted_contents AFTER DELETE ON inbox_contents
    REFERENCING OLD TABLE AS old_contents
    FOR EACH STATEMENT EXECUTE FUNCTION inbox_count_contents();

-- A content goes when no scope row points at it any more (the per-scope cap,
-- a scope's DELETE, retention), whoever deletes the rows. Two transactions
-- dropping a content's last two rows at once each still see the other's row
-- and keep it: the sink's prune sweeps such orphans (inbox/messages.sql
-- free_orphan_contents), rather than every delete taking row locks that
-- could deadlock against a store trimming several scopes.
CREATE FUNCTION inbox_free_contents() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM inbox_contents AS c
    WHERE c.id IN (SELECT content_id FROM gone_messages)
      AND NOT EXISTS (SELECT 1 FROM inbox_messages AS m WHERE m.content_id = c.id);
    RETURN NULL;
END $$;
CREATE TRIGGER inbox_free_deleted_contents AFTER DELETE ON inbox_messages
    REFERENCING OLD TABLE AS gone_messages
    FOR EACH STATEMENT EXECUTE FUNCTION inbox_free_contents();

-- Which of a scope's messages a reader sees: newer than `since`, within
-- retention, and matching the to / subject / q filters (each NULL for no
-- filter, else an escaped ILIKE pattern). A long poll's check (inbox/messages.sql
-- scan_scope) and the listing it then answers with (list_summaries) both
-- read this, so a poll cannot count messages the listing does not return.
-- A STABLE SQL function of one SELECT: the planner inlines it, so the
-- (scope, id) index still serves the scope, `since` and the callers' ORDER
-- BY id LIMIT, and the columns a caller leaves unread are never fetched.
CREATE FUNCTION inbox_visible_messages(
    in_scope text, in_since bigint, in_retention_seconds double precision,
    in_to text, in_subject text, in_q text
) RETURNS TABLE (
    id bigint, scope text, recipients text[], received_at timestamptz,
    mail_from text, subject text, message_id text, headers jsonb, links text[],
    raw bytea, text_body text, html_body text
)
LANGUAGE sql STABLE AS $$
    SELECT m.id, m.scope, m.recipients, m.received_at,
           c.mail_from, c.subject, c.message_id, c.headers, c.links,
           c.raw, c.text_body, c.html_body
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
$$;
