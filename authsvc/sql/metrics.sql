-- outbox_gauges --
-- Current outbox state: jobs per status, due backlog, live leases, oldest pending age.
SELECT
    count(*) FILTER (WHERE status = 'pending') AS pending,
    count(*) FILTER (WHERE status = 'sent') AS sent,
    count(*) FILTER (WHERE status = 'failed') AS failed,
    count(*) FILTER (WHERE status = 'superseded') AS superseded,
    count(*) FILTER (WHERE status = 'expired') AS expired,
    count(*) FILTER (WHERE status = 'suppressed') AS suppressed,
    count(*) FILTER (WHERE status = 'pending' AND next_attempt_at <= now()
                     AND (lease_expires_at IS NULL OR lease_expires_at <= now())) AS due,
    count(*) FILTER (WHERE status = 'pending' AND lease_expires_at > now()) AS leased,
    coalesce(extract(epoch FROM now() - min(created_at) FILTER (WHERE status = 'pending')), 0)::float8
        AS oldest_pending_seconds
FROM email_jobs;

-- event_totals --
-- Audit-trail events by kind, plus claims that took over an expired lease
-- (a claim whose previous event for the job was also a claim).
SELECT event, count(*) AS total FROM email_job_events GROUP BY event
UNION ALL
SELECT 'lease_expired', count(*) FROM (
    SELECT event, lag(event) OVER (PARTITION BY job_id ORDER BY id) AS previous
    FROM email_job_events
) AS trail
WHERE event = 'claimed' AND previous = 'claimed';

-- send_latency --
-- Queue-to-accepted seconds of sent jobs, as cumulative histogram buckets.
SELECT bound, count(*) FILTER (WHERE extract(epoch FROM sent_at - created_at) <= bound) AS le
FROM unnest(%(bounds)s::float8[]) AS bound
LEFT JOIN email_jobs ON status = 'sent'
GROUP BY bound ORDER BY bound;

-- send_latency_totals --
-- Sum and count for the histogram.
SELECT coalesce(sum(extract(epoch FROM sent_at - created_at)), 0)::float8 AS total_seconds,
       count(*) AS sent
FROM email_jobs WHERE status = 'sent';
