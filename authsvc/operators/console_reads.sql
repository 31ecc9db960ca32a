-- outcomes_per_minute --
-- Emails and events sent and failed in each minute of the last hour (the
-- overview's chart), from the trail's outcome rows (email_job_events_outcomes).
SELECT date_trunc('minute', created_at) AS minute,
       count(*) FILTER (WHERE event = 'sent') AS sent,
       count(*) FILTER (WHERE event = 'failed') AS failed
FROM email_job_events
WHERE event IN ('sent', 'failed') AND created_at > %(since)s
GROUP BY 1 ORDER BY 1;

-- queue_clock --
-- The database's clock, and how long the oldest job that is due now has been
-- due (the queue's lag), in one statement: the outbox's due times and trail are
-- written by the database's clock, so the figures that compare with them read it.
SELECT now() AS now,
       coalesce(extract(epoch FROM now() - min(next_attempt_at)), 0)::float8
           AS oldest_due_seconds
FROM email_jobs
WHERE status = 'pending' AND outbox_job_due(status, next_attempt_at, lease_expires_at);

-- failing_webhook_targets --
-- Apps whose webhook deliveries failed or are retrying in the last day, worst first,
-- each with the error of its latest failed attempt (by the trail's order).
SELECT a.id, a.name, a.webhook_url,
       count(*) FILTER (WHERE j.status = 'failed') AS failed,
       count(*) FILTER (WHERE j.status = 'pending' AND j.attempt_count > 0) AS retrying,
       (array_agg(j.last_error ORDER BY t.latest DESC NULLS LAST, j.id DESC)
            FILTER (WHERE j.last_error IS NOT NULL))[1] AS last_error
FROM email_jobs AS j JOIN apps AS a ON a.id = j.app_id
LEFT JOIN LATERAL (
    SELECT max(e.id) AS latest FROM email_job_events AS e
    WHERE e.job_id = j.id AND e.event IN ('failed', 'retry')
) AS t ON true
WHERE j.kind = 'webhook' AND j.created_at > %(since)s
  AND (j.status = 'failed' OR (j.status = 'pending' AND j.attempt_count > 0))
GROUP BY a.id, a.name, a.webhook_url
ORDER BY failed DESC, retrying DESC
LIMIT 20;

-- webhook_health --
-- Every app's webhook deliveries over the last day, by outcome.
SELECT j.app_id,
       count(*) FILTER (WHERE j.status = 'sent') AS sent,
       count(*) FILTER (WHERE j.status = 'failed') AS failed,
       count(*) FILTER (WHERE j.status = 'pending') AS pending
FROM email_jobs AS j
WHERE j.kind = 'webhook' AND j.created_at > %(since)s
GROUP BY j.app_id;

-- find_jobs --
-- A page of jobs, newest first, by status, kind and recipient (any may be null);
-- before_id pages back from the previous page's last job.
SELECT id, status, kind, template, recipient, attempt_count, created_at, next_attempt_at,
       lease_owner, lease_expires_at, sent_at, last_error
FROM email_jobs
WHERE (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(kind)s::text IS NULL OR kind = %(kind)s::text)
  AND (%(recipient)s::text IS NULL OR recipient = %(recipient)s::text)
  AND (%(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint)
ORDER BY id DESC
LIMIT %(limit)s;

-- account_emails --
-- An account's most recent emails, newest first.
SELECT id, status, kind, template, recipient, attempt_count, created_at, next_attempt_at,
       lease_owner, lease_expires_at, sent_at, last_error
FROM email_jobs
WHERE user_id = %(user_id)s AND kind = 'email'
ORDER BY id DESC
LIMIT %(limit)s;

-- find_suppressions --
-- Suppressed addresses, newest first, those containing a search text if given.
SELECT address, event, provider, provider_message_id, detail, suppressed_at
FROM suppressions
WHERE %(search)s::text IS NULL OR strpos(address, %(search)s::text) > 0
ORDER BY suppressed_at DESC, address
LIMIT %(limit)s;
