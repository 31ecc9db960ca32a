-- try_lock_key --
-- Claim (app, key) until this transaction ends; false while another request holds it.
SELECT pg_try_advisory_xact_lock(hashtextextended(%(lock_name)s, 0));

-- find_idempotency_record --
-- The stored outcome of an earlier request with this key, if still within its lifetime.
SELECT fingerprint, status_code, response_body, created_at
FROM idempotency_keys
WHERE app_id = %(app_id)s AND key = %(key)s AND created_at > %(not_before)s;

-- save_idempotency_record --
-- Store a request's outcome; an expired record under the same key is replaced,
-- a live one is left alone (and no row comes back).
INSERT INTO idempotency_keys (app_id, key, fingerprint, status_code, response_body, created_at)
VALUES (%(app_id)s, %(key)s, %(fingerprint)s, %(status_code)s, %(response_body)s, %(now)s)
ON CONFLICT (app_id, key) DO UPDATE
SET fingerprint = excluded.fingerprint,
    status_code = excluded.status_code,
    response_body = excluded.response_body,
    created_at = excluded.created_at
WHERE idempotency_keys.created_at <= %(not_before)s
RETURNING created_at;

-- prune_idempotency_keys --
-- Forget records past their lifetime.
DELETE FROM idempotency_keys WHERE created_at <= %(before)s;
