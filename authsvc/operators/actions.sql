-- job_link_current --
-- Whether a job's link (if it has one) is still the one that would redeem:
-- the claim's own test (authsvc/worker/jobs.sql), for a redrive's rule (SPEC §2).
SELECT j.purpose IS NULL OR j.token_version IS NOT DISTINCT FROM (
    CASE WHEN j.purpose = 'email_revert' THEN
             (SELECT c.version FROM email_changes AS c
              WHERE c.user_id = j.user_id AND c.version = j.token_version AND c.ended_at IS NULL)
         WHEN j.purpose = 'console_login' THEN
             (SELECT o.code_version FROM operators AS o WHERE o.user_id = j.user_id)
         ELSE (SELECT link_version(u, j.purpose) FROM users AS u WHERE u.id = j.user_id)
    END)
FROM email_jobs AS j WHERE j.id = %(job_id)s;

-- void_undo_links --
-- End every standing address change of an account, so none of its undo links
-- works any more (their pending emails are superseded at claim).
UPDATE email_changes SET ended_at = %(now)s, ended_by = 'voided'
WHERE user_id = %(user_id)s AND ended_at IS NULL;
