-- Whether a job's link (if it has one) is still the one that would redeem, in
-- one place: the claim reads the version from it (authsvc/worker/jobs.sql, a
-- replaced link is superseded, not sent) and the console's redrive asks it
-- (authsvc/operators/actions.sql, SPEC §2: only a job whose link is current).
--
-- current_version is the version a link of the job's purpose must carry to
-- redeem now: link_version (0027, 0031) for an account's own links; an undo
-- link's own version while its address change stands (email_changes), none
-- once it ended; an operator's console code, the operator's own, none once the
-- role is gone. is_current: the job has no link, or it carries that version.
--
-- A set-returning SQL function so the planner inlines it: called in FROM (or
-- in a scalar subquery's FROM) it becomes the same subplans the claim had as
-- its own CASE. A scalar SQL function with subqueries is never inlined and
-- costs a function call per claimed row (bench/mechanics.py).
CREATE FUNCTION job_link_current(job_purpose text, job_user bigint, job_version integer)
RETURNS TABLE (current_version integer, is_current boolean)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
SELECT v.version, job_purpose IS NULL OR job_version IS NOT DISTINCT FROM v.version
FROM (SELECT CASE
          WHEN job_purpose IS NULL THEN NULL
          WHEN job_purpose = 'email_revert' THEN
              (SELECT c.version FROM email_changes AS c
               WHERE c.user_id = job_user AND c.version = job_version AND c.ended_at IS NULL)
          WHEN job_purpose = 'console_login' THEN
              (SELECT o.code_version FROM operators AS o WHERE o.user_id = job_user)
          ELSE (SELECT link_version(u, job_purpose) FROM users AS u WHERE u.id = job_user)
      END AS version) AS v
$$;
