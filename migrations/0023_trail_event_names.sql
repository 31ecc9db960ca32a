-- The audit trail's event names, written down once: email_job_events.event
-- takes only these (migrations/schema.sql's header says what each means and
-- who writes it). Its writers are worker/jobs.sql (claim_batch: claimed;
-- record_outcomes: an outcome, or lease_lost) and outbox/admin.sql
-- (redrive_job: redriven); tests/test_schema_file.py holds worker/jobs.py's
-- OUTCOME_EVENTS to this list.
--
-- Added NOT VALID and validated after a commit: ADD CONSTRAINT takes an
-- ACCESS EXCLUSIVE lock, held to the end of its transaction, so validating in
-- the same transaction would stop every claim and outcome for the whole scan
-- of the trail (ten million rows on a big outbox). NOT VALID checks only new
-- rows and returns at once; VALIDATE, in a transaction of its own, scans
-- under SHARE UPDATE EXCLUSIVE, which lets the worker go on writing.
-- DROP … IF EXISTS first, so a run stopped before the commit can repeat this.
ALTER TABLE email_job_events DROP CONSTRAINT IF EXISTS email_job_events_event_check;
ALTER TABLE email_job_events ADD CONSTRAINT email_job_events_event_check CHECK (event IN (
    'claimed',                                                -- a worker took a lease
    'sent', 'failed', 'superseded', 'expired', 'suppressed',  -- final: the job's new status
    'retry', 'ambiguous', 'released',                         -- back to pending
    'lease_lost',                                             -- an outcome recorded too late
    'redriven'                                                -- an operator's second chance
)) NOT VALID;
-- migrate: commit
ALTER TABLE email_job_events VALIDATE CONSTRAINT email_job_events_event_check;
