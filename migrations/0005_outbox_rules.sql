-- The outbox's one definition of "due" and "leased" (issue 10). The claim
-- (worker/jobs.sql), `authsvc outbox stats` and /metrics all call these, so a
-- dead worker's expired lease counts as due everywhere, exactly when the
-- claim would take it. Plain SQL functions of the row's columns, STABLE and
-- not STRICT, so the planner inlines them: the claim still walks the partial
-- index email_jobs_due (tests/test_outbox_rules.py checks the plan).

-- Claimable now: pending, its time has come, and no live lease holds it. A
-- claim moves next_attempt_at to the lease expiry, so a crashed worker's row
-- becomes due exactly when its lease runs out.
CREATE FUNCTION outbox_job_due(status text, next_attempt_at timestamptz,
                               lease_expires_at timestamptz)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT status = 'pending' AND next_attempt_at <= now()
       AND (lease_expires_at IS NULL OR lease_expires_at <= now())
$$;

-- Held by a worker whose lease has not run out.
CREATE FUNCTION outbox_job_leased(status text, lease_expires_at timestamptz)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT status = 'pending' AND lease_expires_at > now()
$$;
