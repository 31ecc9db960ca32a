-- issue_code --
-- The password step passed: the operator's codes move to a new version (every
-- earlier code stops working), earlier unfinished sign-ins go, and the new one
-- is recorded. Returns the version the emailed code carries and whether a code
-- is emailed (no TOTP set up); nothing when the account is not an operator
-- (removed meanwhile).
WITH bumped AS (
    UPDATE operators SET code_version = code_version + 1
    WHERE user_id = %(user_id)s
    RETURNING user_id, code_version, totp_secret IS NULL AS emailed
), dropped AS (
    DELETE FROM console_sign_ins WHERE user_id IN (SELECT user_id FROM bumped)
), recorded AS (
    INSERT INTO console_sign_ins (token_hash, user_id, code_version, issued_at)
    SELECT %(token_hash)s, user_id, code_version, %(issued_at)s FROM bumped
)
SELECT code_version, emailed FROM bumped;

-- queue_tries --
-- Codes sent together for one sign-in wait for one another, until each commits,
-- whether the sign-in exists or not: after a right password take_try's row lock
-- would queue them anyway, and if only then, a few codes sent at once would time
-- which password was right. A transaction lock (nothing written); its own key
-- space (two keys) and a hash of the token's hash: a collision only queues.
SELECT pg_advisory_xact_lock(hashtext('authsvc.console.sign_in'),
                             hashtext(encode(%(token_hash)s, 'hex')));

-- take_try --
-- One of the sign-in's tries at its code, taken before the code is checked: a
-- guess waits here for the one before it, so concurrent guesses cannot share a
-- try. Returns the sign-in with its operator's address and TOTP, if set, and
-- the tries taken; nothing when it never was, ended, has none left or was
-- issued before issued_after (its code's lifetime is over).
WITH tried AS (
    UPDATE console_sign_ins SET wrong_codes = wrong_codes + 1
    WHERE token_hash = %(token_hash)s AND wrong_codes < %(max_tries)s
      AND issued_at > %(issued_after)s
    RETURNING user_id, code_version, issued_at, wrong_codes
)
SELECT t.user_id, t.code_version, t.issued_at, t.wrong_codes, u.email, o.totp_secret,
       o.totp_last_step
FROM tried AS t JOIN users AS u ON u.id = t.user_id
JOIN operators AS o ON o.user_id = t.user_id;

-- drop_sign_in --
-- A sign-in ended: its code was used.
DELETE FROM console_sign_ins WHERE token_hash = %(token_hash)s;

-- use_code --
-- The single-use guard: the code's version moves on only if it is still the
-- current one, so a second use of the same code (or a race of two) matches nothing.
-- A TOTP code's step must also be later than the last one accepted.
UPDATE operators
SET code_version = code_version + 1,
    totp_last_step = coalesce(%(totp_step)s::bigint, totp_last_step)
WHERE user_id = %(user_id)s AND code_version = %(code_version)s
  AND (%(totp_step)s::bigint IS NULL OR totp_last_step < %(totp_step)s::bigint)
RETURNING user_id;

-- start_console_session --
-- A console session for an operator; the cookie carries the token, this row its hash.
INSERT INTO console_sessions (token_hash, user_id, created_at, last_seen_at, user_agent)
VALUES (%(token_hash)s, %(user_id)s, %(now)s, %(now)s, %(user_agent)s)
RETURNING id;

-- prune_console_sessions --
-- Drop sessions past their idle or total lifetime (run at each sign-in).
DELETE FROM console_sessions
WHERE created_at <= %(started_before)s OR last_seen_at <= %(idle_before)s;

-- touch_console_session --
-- The live console session for a token hash and its operator, seen now. Live:
-- started within the total lifetime, seen within the idle one, and its account
-- still an operator (the foreign key ends a removed operator's sessions).
UPDATE console_sessions AS s SET last_seen_at = %(now)s
FROM operators AS o JOIN users AS u ON u.id = o.user_id
WHERE s.token_hash = %(token_hash)s AND o.user_id = s.user_id
  AND s.created_at > %(started_before)s AND s.last_seen_at > %(idle_before)s
RETURNING s.id, u.id AS user_id, u.email;

-- end_console_session --
-- Sign out of the console: the row goes, so no copy of the cookie opens anything.
DELETE FROM console_sessions WHERE token_hash = %(token_hash)s;
