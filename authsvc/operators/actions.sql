-- job_link_current --
-- Whether a job's link (if it has one) is still the one that would redeem:
-- the claim's own rule (migrations/0035), for a redrive's rule (SPEC §2).
SELECT l.is_current
FROM email_jobs AS j,
     LATERAL job_link_current(j.purpose, j.user_id, j.token_version) AS l
WHERE j.id = %(job_id)s;

-- void_undo_links --
-- End every standing address change of an account, so none of its undo links
-- works any more (their pending emails are superseded at claim).
UPDATE email_changes SET ended_at = %(now)s, ended_by = 'voided'
WHERE user_id = %(user_id)s AND ended_at IS NULL;
