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
-- every language (the API's `user.id` is an integer). Two ids collide with
-- odds n / 9.0e15 for the n-th row: about one in a billion at ten million
-- accounts, and the loser's INSERT fails (the request can be retried).
CREATE FUNCTION unordered_id() RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL SAFE
RETURN 1 + floor(random() * 9007199254740990)::bigint;

ALTER TABLE users ALTER COLUMN id DROP IDENTITY;
ALTER TABLE users ALTER COLUMN id SET DEFAULT unordered_id();
ALTER TABLE web_sessions ALTER COLUMN id DROP IDENTITY;
ALTER TABLE web_sessions ALTER COLUMN id SET DEFAULT unordered_id();

-- Nullable with a default for new rows, so adding it rewrites nothing: only
-- the jobs that may still be sent (pending, and failed ones a redrive may
-- send) get an id now; the others are never seen by anyone again.
ALTER TABLE email_jobs ADD COLUMN public_id uuid;
ALTER TABLE email_jobs ALTER COLUMN public_id SET DEFAULT gen_random_uuid();
UPDATE email_jobs SET public_id = gen_random_uuid() WHERE status IN ('pending', 'failed');
