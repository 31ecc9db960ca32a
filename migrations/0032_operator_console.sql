-- The operator console (SPEC §15): who may open it, its sign-ins and sessions,
-- and the log of what operators did there.
--
-- Everything before the commit line may run twice (IF NOT EXISTS, DROP ... IF
-- EXISTS): a runner that stopped after that part commits, or a second runner
-- beside it, runs it again before the part that records the migration.

-- An operator is a confirmed account given the role (`authsvc operators add`).
-- code_version is the version the emailed sign-in code of this operator must
-- carry: each password step bumps it (so only the newest code works), and a
-- used code bumps it again (so no code works twice). The account's deletion
-- ends the role with it.
-- An operator who set up TOTP (`authsvc operators totp`) signs in with their
-- authenticator's code instead of an emailed one: totp_secret is the shared
-- secret sealed under AUTHSVC_SECRET_KEYS (authsvc/operators/totp.py), and
-- totp_last_step the last 30-second step accepted, so no code works twice.
CREATE TABLE IF NOT EXISTS operators (
    user_id        bigint PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    code_version   integer NOT NULL DEFAULT 0,
    added_at       timestamptz NOT NULL DEFAULT now(),
    totp_secret    bytea,
    totp_last_step bigint NOT NULL DEFAULT 0
);

-- The step between the password and the code: the browser holds a random
-- token, the row its SHA-256, the code's claims (operator, version, issued_at)
-- and how many wrong codes were typed for it. Gone once used or replaced.
CREATE TABLE IF NOT EXISTS console_sign_ins (
    token_hash   bytea PRIMARY KEY,
    user_id      bigint NOT NULL REFERENCES operators (user_id) ON DELETE CASCADE,
    code_version integer NOT NULL,
    issued_at    timestamptz NOT NULL,
    wrong_codes  integer NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS console_sign_ins_user ON console_sign_ins (user_id);

-- Console sessions, apart from web_sessions: a user's session never opens the
-- console, and removing an operator ends theirs (the foreign key). The row
-- keeps only the token's SHA-256; idle and total lifetimes are checked
-- against last_seen_at and created_at at every request.
CREATE TABLE IF NOT EXISTS console_sessions (
    id           bigint PRIMARY KEY DEFAULT unordered_id(),
    token_hash   bytea NOT NULL UNIQUE,
    user_id      bigint NOT NULL REFERENCES operators (user_id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,
    user_agent   text NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS console_sessions_user ON console_sessions (user_id);

-- Every console action, written in the action's own transaction: who (the
-- operator's account id and address then, kept when the operator goes), what,
-- on what, when. Targets name accounts by id, never by address, so a deleted
-- account leaves no address here.
CREATE TABLE IF NOT EXISTS operator_log (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    operator_id    bigint,
    operator_email text NOT NULL,
    action         text NOT NULL,
    target         text NOT NULL DEFAULT '',
    detail         text NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS operator_log_created ON operator_log (created_at DESC, id DESC);

-- The console's sign-in code goes through the outbox like every other email:
-- minted by the worker at send time from (operator, console_login, version,
-- issued_at), never stored.
ALTER TABLE email_jobs DROP CONSTRAINT IF EXISTS email_jobs_purpose_check;
-- The lists name every purpose and template the migrations before this one
-- may have added (0030's email_change_approval, 0031's sign_in and
-- no_account): replacing a CHECK must not drop what another migration allowed.
ALTER TABLE email_jobs ADD CONSTRAINT email_jobs_purpose_check
    CHECK (purpose IN ('reset', 'verify', 'email_change', 'email_change_approval',
                       'email_revert', 'account_delete', 'sign_in', 'console_login'))
    NOT VALID;
ALTER TABLE email_jobs DROP CONSTRAINT IF EXISTS email_jobs_template_check;
ALTER TABLE email_jobs ADD CONSTRAINT email_jobs_template_check CHECK (
    (kind = 'email' AND template IN (
        'verify', 'reset', 'account_exists', 'password_changed',
        'email_change', 'email_change_approval', 'email_in_use', 'email_changed',
        'email_restored', 'account_delete', 'sign_in', 'no_account',
        'console_code'     -- an operator's sign-in code
    ))
    OR (kind = 'webhook' AND app_id IS NOT NULL
        AND template IN ('user.verified', 'user.password_changed',
                         'email.delivered', 'email.failed',
                         'user.email_changed', 'user.email_restored', 'user.deleted'))
) NOT VALID;

-- An operator may cancel a job that is pending (and not being sent) or failed:
-- it is then never sent, and no redrive brings it back. Its trail says so.
ALTER TABLE email_jobs DROP CONSTRAINT IF EXISTS email_jobs_status_check;
ALTER TABLE email_jobs ADD CONSTRAINT email_jobs_status_check CHECK (status IN (
    'pending', 'sent', 'failed', 'superseded', 'expired', 'suppressed', 'cancelled'
)) NOT VALID;
ALTER TABLE email_job_events DROP CONSTRAINT IF EXISTS email_job_events_event_check;
ALTER TABLE email_job_events ADD CONSTRAINT email_job_events_event_check CHECK (event IN (
    'claimed',                                                -- a worker took a lease
    'sent', 'failed', 'superseded', 'expired', 'suppressed',  -- final: the job's new status
    'retry', 'ambiguous', 'released',                         -- back to pending
    'lease_lost',                                             -- an outcome recorded too late
    'redriven',                                               -- an operator's second chance
    'cancelled'                                               -- an operator's stop
)) NOT VALID;

-- The overview's chart: sends and failures per minute over the last hour,
-- read from the trail's newest rows only.
CREATE INDEX IF NOT EXISTS email_job_events_outcomes ON email_job_events (created_at)
    WHERE event IN ('sent', 'failed');
-- migrate: commit
ALTER TABLE email_jobs VALIDATE CONSTRAINT email_jobs_purpose_check;
ALTER TABLE email_jobs VALIDATE CONSTRAINT email_jobs_template_check;
ALTER TABLE email_jobs VALIDATE CONSTRAINT email_jobs_status_check;
ALTER TABLE email_job_events VALIDATE CONSTRAINT email_job_events_event_check;
