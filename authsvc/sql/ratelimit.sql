-- hit --
-- Count one event in the bucket's current window; returns the window's total.
INSERT INTO rate_limit_counters (bucket, window_start, hits)
VALUES (%(bucket)s, %(window_start)s, 1)
ON CONFLICT (bucket, window_start) DO UPDATE SET hits = rate_limit_counters.hits + 1
RETURNING hits;

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
