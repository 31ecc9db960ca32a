-- hit --
-- Count one event in the bucket's current window; returns the window's total.
-- With wait_for_disk false (ratelimit.hit allows it only for a statement
-- that is its own transaction) the commit does not wait for its WAL flush:
-- set_config's third argument scopes the setting to this transaction.
INSERT INTO rate_limit_counters (bucket, window_start, hits)
SELECT %(bucket)s, %(window_start)s, 1
FROM (SELECT CASE WHEN NOT %(wait_for_disk)s
                  THEN set_config('synchronous_commit', 'off', true) END) AS commit_mode
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
