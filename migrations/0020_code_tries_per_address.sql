-- Code tries are counted per (purpose, address), no longer per version.
--
-- 0006 kept one count per (purpose, address, version), version 0 standing
-- for "no code", and 0018 emptied the "no code" count whenever an email was
-- allowed. But a version can change without an email: a signup for an
-- unconfirmed address retires its links even when the email budget
-- suppresses the new one (SPEC §4a). That account then had no code, fell
-- back to the "no code" count, which the last allowed email had emptied,
-- and got five fresh tries no confirmed or unknown address gets: spend the
-- budget, five wrong codes, a signup over budget, one more code, and the
-- answers (400 against 410) told which address had an unconfirmed account.
--
-- Now one rule, here, decides when tries start afresh: an email counted
-- within the address's budget (email_budget_hit), which is exactly when a
-- new code may be sent, whether or not the address has an account to send
-- it to. Versions, accounts and suppressed signups no longer touch the
-- count, so the answer to a wrong code follows from the requests alone
-- (tests/test_security_code_sequences.py).

-- Each address keeps the most tries any of its versions had and the latest
-- start: no address gains tries by the upgrade (an owner whose older code was
-- used up asks for a new email, as after five wrong codes), and no count is
-- pruned sooner than it would have been.
ALTER TABLE code_attempts DROP CONSTRAINT code_attempts_pkey;
UPDATE code_attempts c SET attempts = m.attempts, created_at = m.created_at
FROM (SELECT purpose, address_digest, max(attempts) AS attempts, max(created_at) AS created_at
      FROM code_attempts GROUP BY purpose, address_digest) AS m
WHERE c.purpose = m.purpose AND c.address_digest = m.address_digest;
DELETE FROM code_attempts c USING code_attempts d
WHERE d.purpose = c.purpose AND d.address_digest = c.address_digest AND d.version > c.version;
ALTER TABLE code_attempts DROP COLUMN version;
ALTER TABLE code_attempts ADD PRIMARY KEY (purpose, address_digest);

-- Within the budget the address's count is dropped: the email allowed now
-- carries a new code (an account's new version), or would, had the address
-- one to send it to (no account, nothing to verify); either way five fresh
-- tries, so the two stay indistinguishable. Over the budget nothing changes,
-- whatever else the request did.
CREATE OR REPLACE FUNCTION email_budget_hit(budget_bucket text, budget_window timestamptz,
                                            budget_limit integer, tries_purpose text,
                                            tries_digest bytea)
RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    allowed boolean;
BEGIN
    allowed := rate_limit_hit(budget_bucket, budget_window, budget_limit, true);
    IF allowed THEN
        DELETE FROM code_attempts
        WHERE purpose = tries_purpose AND address_digest = tries_digest;
    END IF;
    RETURN allowed;
END $$;

-- Its only caller was the function above.
DROP FUNCTION code_attempts_forget_unissued(text, bytea);
