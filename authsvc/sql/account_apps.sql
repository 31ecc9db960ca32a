-- note_signup --
-- A signup through an app, right after users.sql register_signup in the same
-- transaction: the account becomes the app's when this signup created it
-- (unproven, and its first signup: a further one or a resend counts two).
-- Returns whether the account belongs to the app, i.e. whether the app's
-- redirect_url may apply. One statement whether or not the account is new,
-- so the answer's timing does not tell them apart.
WITH joined AS (
    INSERT INTO account_apps (user_id, app_id, since)
    SELECT u.id, %(app_id)s, %(now)s FROM users AS u
    WHERE u.id = %(user_id)s AND u.email_verified_at IS NULL AND u.signup_count = 1
    ON CONFLICT DO NOTHING
    RETURNING app_id
)
SELECT EXISTS (SELECT 1 FROM joined) OR account_belongs_to_app(%(user_id)s, %(app_id)s);

-- note_completed_flow --
-- A redeemed link or code, in the redemption's transaction: the account
-- becomes the app's whose call sent it (NULL: the pages; nobody's). The first
-- proof of an address also ends the memberships its signups gave before
-- anyone proved it, except the proving flow's app: whoever signed it up
-- first may not have been its holder.
WITH unproven_claims AS (
    DELETE FROM account_apps
    WHERE user_id = %(user_id)s AND %(first_proof)s
      AND app_id IS DISTINCT FROM %(app_id)s::uuid
)
INSERT INTO account_apps (user_id, app_id, since)
SELECT %(user_id)s, %(app_id)s::uuid, %(now)s WHERE %(app_id)s::uuid IS NOT NULL
ON CONFLICT DO NOTHING;
