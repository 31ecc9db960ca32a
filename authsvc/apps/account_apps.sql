-- note_signup --
-- A signup through an app, right after users.sql register_signup in the same
-- transaction (which holds the row's lock): the account becomes the app's
-- when this signup created it (unproven, and its first signup: a further one
-- or a resend counts two). Returns whether the account belongs to the app
-- now (account_belongs_to_app: a contested unproven address is nobody's),
-- i.e. whether the app's redirect_url applies and its email is the app's
-- own. One statement whether or not the account is new, so the answer's
-- timing does not tell them apart.
WITH joined AS (
    INSERT INTO account_apps (user_id, app_id, since)
    SELECT u.id, %(app_id)s, %(now)s FROM users AS u
    WHERE u.id = %(user_id)s AND u.email_verified_at IS NULL AND u.signup_count = 1
    ON CONFLICT DO NOTHING
    RETURNING app_id
)
SELECT EXISTS (SELECT 1 FROM joined) OR account_belongs_to_app(%(user_id)s, %(app_id)s);

-- note_first_proof --
-- The first redemption of a link or code sent to an unproven address, in the
-- redemption's transaction. The signup's app keeps the account only when
-- the redeemed email was its own (%(own_app)s: the app whose call queued it
-- while the account was that app's, "own_account" in the job's payload);
-- a link that the pages or another app's call sent, or the app's own sent
-- after the address was contested, proves it for no app. No row is ever
-- added here: completing a flow cannot make an app a member.
DELETE FROM account_apps
WHERE user_id = %(user_id)s AND app_id IS DISTINCT FROM %(own_app)s::uuid;

-- belongs_to_app --
-- Whether the account is the app's now (account_belongs_to_app, migrations/0026_baseline.sql):
-- whether the app's redirect applies and its email is the app's own.
SELECT account_belongs_to_app(%(user_id)s, %(app_id)s);
