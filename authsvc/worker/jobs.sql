-- claim_batch --
-- Lease up to n due jobs, oldest first, and return what sending them needs.
-- Locking the ids in a CTE (not `WHERE id IN (SELECT … LIMIT n)`) keeps the
-- planner from updating more rows than the limit and lets it walk the
-- partial index email_jobs_due; handing them to the UPDATE as one array
-- makes it fetch exactly those rows by primary key (a join here chose a
-- sequential scan of a 20k-row outbox: see bench/claim_plan.py).
-- next_attempt_at moves to the lease expiry, so a job whose worker died
-- becomes due again exactly when its lease runs out.
WITH due AS (
    -- The outbox's one due rule (migrations/0026_baseline.sql), the one
    -- `authsvc outbox stats` and /metrics count with. The planner inlines it,
    -- so the partial index email_jobs_due still serves this scan.
    -- A due row that still has a lease owner is a lease that ran out
    -- unrecorded: every way a claim ends clears the owner.
    SELECT id, lease_owner IS NOT NULL AS taken_over FROM email_jobs
    WHERE outbox_job_due(status, next_attempt_at, lease_expires_at)
    ORDER BY next_attempt_at, id
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE email_jobs AS j
    SET lease_owner = %(owner)s,
        lease_expires_at = now() + make_interval(secs => %(lease_seconds)s),
        next_attempt_at = now() + make_interval(secs => %(lease_seconds)s),
        attempt_count = j.attempt_count + 1
    WHERE j.id = ANY (ARRAY(SELECT id FROM due))
    RETURNING j.id, j.public_id, j.template, j.recipient, j.payload, j.user_id, j.purpose,
              j.token_version, j.issued_at, j.attempt_count, j.lease_owner,
              j.lease_expires_at,
              -- The version a link of the job's purpose must carry to redeem now
              -- (migrations/0035 job_link_current, which the console's redrive
              -- asks too); ClaimedJob.superseded compares it as is_current does.
              -- The planner inlines it: the same subplans, no call per row.
              (SELECT l.current_version
               FROM job_link_current(j.purpose, j.user_id, j.token_version) AS l)
                  AS current_version,
              EXISTS (SELECT 1 FROM email_job_events AS e
                      WHERE e.job_id = j.id AND e.event = 'ambiguous') AS ambiguous_before,
              -- A webhook job goes to its app's current URL, signed with its
              -- sealed secret; a revoked app, or one without a webhook, has none.
              j.kind, j.app_id,
              CASE WHEN j.kind = 'webhook' THEN
                  (SELECT a.webhook_url FROM apps AS a
                   WHERE a.id = j.app_id AND a.revoked_at IS NULL) END AS webhook_url,
              -- The secret also signs an app's own-account email for its hook (below).
              CASE WHEN j.kind = 'webhook'
                        OR (j.kind = 'email' AND (j.payload ->> 'own_account') = 'true') THEN
                  (SELECT a.webhook_secret FROM apps AS a
                   WHERE a.id = j.app_id AND a.revoked_at IS NULL) END AS webhook_secret,
              -- Bounced or complaining addresses get no more email (SPEC §10).
              j.kind = 'email' AND EXISTS (SELECT 1 FROM suppressions AS s
                       WHERE s.address = j.recipient) AS suppressed,
              -- An app that delivers its own mail gets, at its delivery URL as it is
              -- now, the emails its own call queued for an account that is its own
              -- alone and proven, as it is now (migrations/0029); every other
              -- email goes through authsvc's transport. The payload test first:
              -- most jobs stop there.
              CASE WHEN j.kind = 'email' AND (j.payload ->> 'own_account') = 'true' THEN
                  (SELECT a.delivery_url FROM apps AS a
                   WHERE a.id = j.app_id AND a.revoked_at IS NULL AND a.delivery_url IS NOT NULL
                     AND app_delivers_mail_to(j.user_id, j.app_id, j.recipient)
                     -- An operator's mail never goes to an app's hook (SPEC §14).
                     AND NOT EXISTS (SELECT 1 FROM operators AS o WHERE o.user_id = j.user_id))
                  END
                  AS delivery_url,
              j.created_at,
              -- The account's locale (SPEC §14: an email without the request's
              -- own uses it), and the app whose brand (and, for the emails that
              -- ask to act, templates) the email takes: the asking app's own
              -- account, never an operator's. A link email was its own when it
              -- was queued (own_account); a notice that protects the person is
              -- branded when the account is the app's as it is now.
              (SELECT u.locale FROM users AS u WHERE u.id = j.user_id) AS user_locale,
              CASE WHEN j.kind = 'email' AND j.app_id IS NOT NULL
                        AND ((j.payload ->> 'own_account') = 'true'
                             OR (j.template IN ('password_changed', 'email_changed',
                                                'email_restored', 'account_exists',
                                                'email_in_use')
                                 AND account_belongs_to_app(j.user_id, j.app_id)))
                        AND NOT EXISTS (SELECT 1 FROM operators AS o WHERE o.user_id = j.user_id)
                   THEN j.app_id END AS brand_app_id
), logged AS (
    INSERT INTO email_job_events (job_id, event, lease_owner, lease_expires_at, attempt, token_version)
    SELECT id, 'claimed', lease_owner, lease_expires_at, attempt_count, token_version FROM claimed
), counted AS (
    -- The outbox counters this claim moves (migrations/0026_baseline.sql).
    INSERT INTO outbox_counter_deltas (name, delta)
    SELECT 'events_claimed', count(*) FROM claimed HAVING count(*) > 0
    UNION ALL
    SELECT 'events_lease_expired', count(*) FROM due WHERE taken_over HAVING count(*) > 0
)
SELECT * FROM claimed ORDER BY id;

-- record_outcomes --
-- Record many claims' outcomes in one statement: each row only while its claim
-- (owner and attempt) still holds the lease, with its audit row in the same
-- statement. The owner is one string per process, so a process that claimed
-- a job again after its own lease expired holds it under the same owner: the
-- attempt (incremented by every claim) tells the claims apart.
-- Final events (sent, failed, superseded, expired, suppressed) end the job; retry and
-- ambiguous put it back after its backoff; released hands it back due now,
-- the attempt it did not make uncounted. An outcome whose lease is gone
-- changes nothing and leaves a lease_lost row instead (a lost release leaves
-- none: nothing was attempted).
WITH outcome AS (
    -- The arrays go in binary (placeholders ending in b, not s): psycopg's
    -- text form quotes every element and formats every timestamp. Adapting
    -- the nine arrays for 50 outcomes took 0.46 ms of the completer's CPU in
    -- text and takes 0.16 ms in binary (the timestamps alone 0.19 and 0.02);
    -- the whole call's CPU went from 0.72 to 0.42-0.55 ms, on the path every
    -- outcome waits on. An array of only NULLs (errors on a batch of sends)
    -- still goes as text of unknown type; the casts here type every array.
    SELECT * FROM unnest(
        %(job_ids)b::bigint[], %(owners)b::text[], %(attempts)b::integer[],
        %(events)b::text[], %(provider_message_ids)b::text[], %(errors)b::text[],
        %(delays)b::float8[], %(lease_expires)b::timestamptz[], %(token_versions)b::integer[]
    ) AS o(job_id, owner, attempt, event, provider_message_id, error, delay_seconds,
           lease_expires_at, token_version)
), recorded AS (
    UPDATE email_jobs AS j
    SET status = CASE WHEN o.event IN ('retry', 'ambiguous', 'released') THEN 'pending'
                      ELSE o.event END,
        sent_at = CASE WHEN o.event = 'sent' THEN now() ELSE j.sent_at END,
        provider_message_id = CASE WHEN o.event IN ('retry', 'ambiguous', 'released')
                                   THEN j.provider_message_id ELSE o.provider_message_id END,
        last_error = CASE WHEN o.event = 'released' THEN j.last_error ELSE o.error END,
        next_attempt_at = CASE
            WHEN o.event = 'released' THEN now()
            WHEN o.event IN ('retry', 'ambiguous')
                THEN now() + make_interval(secs => o.delay_seconds)
            ELSE j.next_attempt_at END,
        attempt_count = CASE WHEN o.event = 'released' THEN greatest(j.attempt_count - 1, 0)
                             ELSE j.attempt_count END,
        lease_owner = NULL,
        lease_expires_at = NULL
    FROM outcome AS o
    WHERE j.id = o.job_id AND j.lease_owner = o.owner AND j.attempt_count = o.attempt
      AND j.status = 'pending'
      -- Said twice on purpose: the join alone let the planner scan every
      -- pending row (a 5,000-row outbox took 2 ms a batch, growing with the
      -- backlog); the array fetches exactly these rows by primary key.
      AND j.id = ANY (%(job_ids)b::bigint[])
    RETURNING o.job_id, j.public_id, o.attempt, o.event, j.kind, j.app_id, j.user_id, j.recipient,
              j.template, j.payload,
              extract(epoch FROM j.sent_at - j.created_at)::float8 AS latency
), app_events AS (
    -- An email an app's call queued tells that app how it ended, in this same
    -- statement: the outcome and its event commit together or not at all.
    -- (events.sql queue_event is the same insert for the web side's events;
    -- app_event_payload, migrations/0026_baseline.sql, builds the envelope for both.)
    INSERT INTO email_jobs (kind, template, recipient, payload, app_id, user_id)
    SELECT 'webhook', e.type, a.webhook_url,
           app_event_payload(e.type, now(), jsonb_strip_nulls(jsonb_build_object(
               'email', jsonb_build_object(
                   -- The public id: the internal one would count everyone's emails.
                   'id', r.public_id::text,
                   'to', r.recipient,
                   'flow', CASE WHEN r.template IN ('reset', 'password_changed')
                                THEN 'password_reset' ELSE 'verification' END),
               'reason', CASE r.event WHEN 'failed' THEN 'rejected'
                                      WHEN 'expired' THEN 'expired' END))),
           a.id, r.user_id
    FROM recorded AS r
    JOIN apps AS a ON a.id = r.app_id
    CROSS JOIN LATERAL (SELECT CASE WHEN r.event = 'sent' THEN 'email.delivered'
                                    ELSE 'email.failed' END AS type) AS e
    WHERE r.kind = 'email' AND r.event IN ('sent', 'failed', 'expired')
      -- Link requests report nothing: unknown addresses queue no job (outbox/rules.py).
      AND NOT coalesce((r.payload ->> 'no_outcome_events')::boolean, false)
      AND a.webhook_url IS NOT NULL AND a.revoked_at IS NULL
), trail AS (
    INSERT INTO email_job_events
        (job_id, event, lease_owner, lease_expires_at, attempt, token_version,
         provider_message_id, error)
    SELECT o.job_id, CASE WHEN r.job_id IS NULL THEN 'lease_lost' ELSE o.event END,
           o.owner, o.lease_expires_at, o.attempt, o.token_version, o.provider_message_id,
           CASE WHEN r.job_id IS NULL
                THEN 'lease lost before recording ' || quote_literal(o.event)
                ELSE o.error END
    FROM outcome AS o
    LEFT JOIN recorded AS r ON r.job_id = o.job_id AND r.attempt = o.attempt
    WHERE r.job_id IS NOT NULL
       -- A lost lease is worth a row only while its job exists: the trail
       -- has no foreign key (migrations/0026_baseline.sql) and no row outlives its job.
       -- KEY SHARE, as the key's own check took: a concurrent prune's DELETE
       -- is waited for (and then there is no job), workers' updates are not.
       OR (o.event <> 'released' AND EXISTS (
           SELECT 1 FROM email_jobs AS g WHERE g.id = o.job_id FOR KEY SHARE))
    RETURNING event
), counted AS (
    -- The outbox counters these outcomes move (migrations/0026_baseline.sql): the jobs
    -- that became final, by status; the trail's events; and the queue-to-sent
    -- seconds of the jobs sent, each in the one histogram bucket it falls in
    -- (a batch's sends share one or two buckets: one or two rows).
    INSERT INTO outbox_counter_deltas (name, delta, seconds)
    SELECT 'jobs_' || event, count(*), 0 FROM recorded
    WHERE event NOT IN ('retry', 'ambiguous', 'released') GROUP BY event
    UNION ALL
    SELECT 'events_' || event, count(*), 0 FROM trail GROUP BY event
    UNION ALL
    SELECT 'send_latency_bucket_' || b.bound::text, count(*), 0
    FROM recorded AS r,
         LATERAL (SELECT min(bound) AS bound FROM unnest(outbox_latency_bounds()) AS bound
                  WHERE r.latency <= bound) AS b
    WHERE r.event = 'sent' AND b.bound IS NOT NULL GROUP BY b.bound
    UNION ALL
    SELECT 'send_latency', count(*), sum(latency) FROM recorded
    WHERE event = 'sent' HAVING count(*) > 0
)
SELECT job_id, attempt FROM recorded;

