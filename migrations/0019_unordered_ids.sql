-- Nothing an outsider sees may count or order anything across accounts.
--
-- Job ids were one sequence, and every email (Message-ID, X-Authsvc-Job) and
-- every email.* event carried one: a reset queues a job only for an existing
-- account, so the gap between two emails to your own mailbox around a reset
-- of someone else's address told whether that address had an account. User
-- ids travel inside every link and in the API; web-session ids in the
-- /account page's forms; both counted everyone's signups and logins.
--
-- Jobs keep their ordered internal id (claims, trails and `authsvc outbox`
-- use it) and gain a random public_id: stable for the life of the job, so a
-- re-send still carries the same Message-ID and provider Idempotency-Key.
-- Users and web sessions are never ordered by id, so their ids become random
-- in place.

-- A random positive id below 2^53, so a JSON number carries it exactly in
-- every language (the API's `user.id` is an integer). The bits come from
-- gen_random_uuid(), the strong source: random() is a per-connection PRNG
-- whose state a few of one's own ids could reveal, and with it everyone
-- else's. The n-th row collides with odds n / 9.0e15 (one in a billion at
-- ten million accounts); the loser's INSERT fails and can be retried.
CREATE FUNCTION unordered_id() RETURNS bigint
LANGUAGE sql VOLATILE
RETURN ((('x' || substr(md5(gen_random_uuid()::text), 1, 14))::bit(56)::bigint >> 3)
        % 9007199254740991) + 1;

ALTER TABLE users ALTER COLUMN id DROP IDENTITY;
ALTER TABLE users ALTER COLUMN id SET DEFAULT unordered_id();
ALTER TABLE web_sessions ALTER COLUMN id DROP IDENTITY;
ALTER TABLE web_sessions ALTER COLUMN id SET DEFAULT unordered_id();

-- Nullable with a default for new rows, so adding it rewrites nothing. Only
-- pending jobs (few, and the next to be sent) get an id here, under the
-- ALTER's lock; a failed one gets its id when a redrive makes it pending
-- again (outbox/admin.sql redrive_job); the others are never sent again.
-- No index: only `authsvc outbox show <public id>` looks a job up by it, an
-- operator's rare command, and a random-uuid index would cost every insert.
ALTER TABLE email_jobs ADD COLUMN public_id uuid;
ALTER TABLE email_jobs ALTER COLUMN public_id SET DEFAULT gen_random_uuid();
UPDATE email_jobs SET public_id = gen_random_uuid() WHERE status = 'pending';
