-- hit --
-- Count one event in the bucket's current window; true while within the limit
-- (rate_limit_hit in migrations/0026_baseline.sql, which apps.sql and email_budget_hit also call).
SELECT rate_limit_hit(%(bucket)s, %(window_start)s, %(limit)s, %(wait_for_disk)s);

-- refund --
-- Take back one event from the bucket's current window.
UPDATE rate_limit_counters SET hits = hits - 1
WHERE bucket = %(bucket)s AND window_start = %(window_start)s AND hits > 0;

-- prune_rate_limits --
-- Forget windows that ended long ago.
DELETE FROM rate_limit_counters WHERE window_start < %(before)s;

-- clear --
-- Forget every window of one bucket (a proven owner starts afresh).
DELETE FROM rate_limit_counters WHERE bucket = %(bucket)s;
