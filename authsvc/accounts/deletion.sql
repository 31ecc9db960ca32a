-- start_deletion --
-- A deletion request: the account's deletion version is bumped (a later
-- request supersedes an earlier one), whether or not the budget then lets
-- the email go. Returns the new version.
UPDATE users SET account_delete_version = account_delete_version + 1
WHERE id = %(user_id)s
RETURNING account_delete_version;

-- drop_pending_jobs --
-- A deleted account's pending emails and events are never sent (their trails
-- go with them: outbox_delete_trails, migrations/0026_baseline.sql).
DELETE FROM email_jobs WHERE user_id = %(user_id)s AND status = 'pending';

-- redact_trails --
-- What a mail server said about the account's emails may name its address.
UPDATE email_job_events AS e
SET error = redact_addresses(e.error, %(addresses)s, %(stand_ins)s)
FROM email_jobs AS j
WHERE j.id = e.job_id AND j.user_id = %(user_id)s AND e.error IS NOT NULL;

-- redact_jobs --
-- The account's finished jobs stay for the outbox's history, with every
-- address in them (an email's recipient, an event's data, an error) replaced
-- by its stand-in, and no longer tied to the account row.
UPDATE email_jobs
SET recipient = CASE WHEN kind = 'email'
                     THEN redact_addresses(recipient, %(addresses)s, %(stand_ins)s)
                     ELSE recipient END,
    payload = redact_addresses(payload::text, %(addresses)s, %(stand_ins)s)::jsonb,
    last_error = redact_addresses(last_error, %(addresses)s, %(stand_ins)s),
    user_id = NULL
WHERE user_id = %(user_id)s;

-- redact_operator_log --
-- A deleted operator's entries in the operator log keep their account id and
-- what they did; their address becomes its stand-in.
UPDATE operator_log
SET operator_email = redact_addresses(operator_email, %(addresses)s, %(stand_ins)s)
WHERE operator_id = %(user_id)s;

-- redact_idempotency_records --
-- Stored answers (24 h, for replays) that name one of the addresses: a
-- confirm's answer carries the account's address. A scan of a day's records;
-- deletions are rare.
UPDATE idempotency_keys
SET response_body = convert_to(
        redact_addresses(convert_from(response_body, 'UTF8'), %(addresses)s, %(stand_ins)s),
        'UTF8')
WHERE EXISTS (SELECT 1 FROM unnest(%(addresses)s::text[]) AS a
              WHERE strpos(lower(convert_from(response_body, 'UTF8')), a) > 0);

-- forget_code_tries --
-- The addresses' code tries (kept under unkeyed digests: they must go).
DELETE FROM code_attempts WHERE address_digest = ANY (%(code_digests)s);

-- forget_redemptions --
-- Which links of the account were used: nothing to tell once it is gone.
DELETE FROM token_redemptions WHERE user_id = %(user_id)s;

-- delete_user --
-- The account; its sessions, apps and change records go with it (ON DELETE CASCADE).
DELETE FROM users WHERE id = %(user_id)s;

-- record_deletion --
-- That an account was deleted, under the keyed digest of its address.
INSERT INTO deleted_accounts (user_id, address_digest, deleted_at, deleted_by)
VALUES (%(user_id)s, %(digest)s, %(now)s, %(deleted_by)s);
