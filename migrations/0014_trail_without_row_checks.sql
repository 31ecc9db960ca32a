-- The audit trail without a foreign-key check per row (issue 11, the
-- worker's server time per email).
--
-- Every email writes two trail rows (its claim and its outcome), and the
-- foreign key to email_jobs checked each one with a query of its own: about
-- 45 µs of server time per email of some 165 (bench: claim and record 100
-- at a time). Every statement that writes the trail takes its job ids from
-- email_jobs rows it has just updated, under their row locks, so the check
-- can never fail; the one exception, a late lease_lost row for a job that
-- is gone, is written only while its job exists (worker/jobs.sql
-- record_outcomes).
--
-- What the key's ON DELETE CASCADE did is kept: a deleted job takes its
-- trail with it, whoever deletes it (prune, an operator), in one statement
-- per delete instead of one per row.
ALTER TABLE email_job_events DROP CONSTRAINT email_job_events_job_id_fkey;

CREATE FUNCTION outbox_delete_trails() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM email_job_events WHERE job_id IN (SELECT id FROM old_jobs);
    RETURN NULL;
END $$;

CREATE TRIGGER outbox_delete_trails AFTER DELETE ON email_jobs
    REFERENCING OLD TABLE AS old_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_delete_trails();
