-- An app that delivers its own mail (SPEC §10 `hook://`): `authsvc apps update
-- ID --delivery-url URL` stores where the worker POSTs each rendered email, as a
-- Standard Webhook signed with the app's webhook secret (the same whsec_ secret
-- its events use, created with the first of the two URLs). The same SSRF rules
-- as event targets apply (authsvc/app_events/targets.py), at set time and at
-- every send.
ALTER TABLE apps
    ADD COLUMN delivery_url text,
    ADD CONSTRAINT apps_delivery_has_secret CHECK (delivery_url IS NULL OR webhook_secret IS NOT NULL);

-- Which emails an app's hook may receive: those of an account that belongs to
-- that app alone, whose address its holder has proven, sent to that address.
-- "Proven" is what keeps the hook from telling the app which addresses have
-- accounts: an app can sign up any address, and a signup creates an account
-- (the app's own, its verification email to the hook) only when the address
-- had none; for an existing address the email goes through authsvc's own
-- transport. A hook that received the one and not the other would tell the
-- app which it was. A proven account that is the app's alone is one whose
-- holder redeemed that app's own email (migrations/0021): the app knows of
-- it already. "Alone": any other app's member (now or later) never has its
-- links or codes handed to this one.
CREATE FUNCTION app_delivers_mail_to(account bigint, app uuid, address text) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
RETURN EXISTS (
    SELECT 1 FROM users AS u JOIN account_apps AS m ON m.user_id = u.id AND m.app_id = app
    WHERE u.id = account AND u.email = address AND u.email_verified_at IS NOT NULL
) AND NOT EXISTS (
    SELECT 1 FROM account_apps AS other WHERE other.user_id = account AND other.app_id <> app
);
