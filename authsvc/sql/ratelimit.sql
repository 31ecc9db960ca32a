-- hit --
-- Count one event in the bucket's current window; returns the window's total.
INSERT INTO rate_limit_counters (bucket, window_start, hits)
VALUES (%(bucket)s, %(window_start)s, 1)
ON CONFLICT (bucket, window_start) DO UPDATE SET hits = rate_limit_counters.hits + 1
RETURNING hits;

-- peek --
-- Events counted so far in the bucket's current window.
SELECT coalesce(max(hits), 0) FROM rate_limit_counters
WHERE bucket = %(bucket)s AND window_start = %(window_start)s;

-- prune_rate_limits --
-- Forget windows that ended long ago.
DELETE FROM rate_limit_counters WHERE window_start < %(before)s;
