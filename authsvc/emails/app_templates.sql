-- put_template --
-- Store an app's template for a kind and locale (checked by the caller),
-- replacing the one there; says whether one was replaced.
INSERT INTO app_templates AS t (app_id, kind, locale, subject, text_body, html_body)
VALUES (%(app_id)s, %(kind)s, %(locale)s, %(subject)s, %(text)s, %(html)s)
ON CONFLICT (app_id, kind, locale) DO UPDATE
    SET subject = excluded.subject, text_body = excluded.text_body,
        html_body = excluded.html_body, updated_at = now()
RETURNING (xmax <> 0) AS replaced;

-- count_other_templates --
-- How many templates the app has besides the one for this kind and locale,
-- holding the app's row until the transaction ends: concurrent uploads of one
-- app count one after the other (the cap, app_templates.py).
SELECT count(t.*)
FROM (SELECT id FROM apps WHERE id = %(app_id)s FOR NO KEY UPDATE) AS a
LEFT JOIN app_templates AS t
    ON t.app_id = a.id AND NOT (t.kind = %(kind)s AND t.locale = %(locale)s)
GROUP BY a.id;

-- get_template --
-- One template of an app.
SELECT kind, locale, subject, text_body AS text, html_body AS html, updated_at
FROM app_templates WHERE app_id = %(app_id)s AND kind = %(kind)s AND locale = %(locale)s;

-- list_templates --
-- Every template of an app (at most MAX_TEMPLATES_PER_APP), by kind then locale:
-- the worker loads them with the brand (looks.py), and GET /api/v1/templates lists them.
SELECT kind, locale, subject, text_body AS text, html_body AS html, updated_at
FROM app_templates WHERE app_id = %(app_id)s ORDER BY kind, locale;

-- delete_template --
-- Remove one template of an app; a row back if there was one.
DELETE FROM app_templates
WHERE app_id = %(app_id)s AND kind = %(kind)s AND locale = %(locale)s
RETURNING kind;
