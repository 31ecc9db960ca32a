-- put_template --
-- Store an app's template for a kind and locale (checked by the caller),
-- replacing the one there; says whether one was replaced.
INSERT INTO app_templates AS t (app_id, kind, locale, subject, text_body, html_body)
VALUES (%(app_id)s, %(kind)s, %(locale)s, %(subject)s, %(text)s, %(html)s)
ON CONFLICT (app_id, kind, locale) DO UPDATE
    SET subject = excluded.subject, text_body = excluded.text_body,
        html_body = excluded.html_body, updated_at = now()
RETURNING (xmax <> 0) AS replaced;

-- get_template --
-- One template of an app.
SELECT kind, locale, subject, text_body AS text, html_body AS html, updated_at
FROM app_templates WHERE app_id = %(app_id)s AND kind = %(kind)s AND locale = %(locale)s;

-- list_templates --
-- Every template of an app, by kind then locale: the worker loads them all at
-- once with the brand (looks.py), and GET /api/v1/templates lists them.
SELECT kind, locale, subject, text_body AS text, html_body AS html, updated_at
FROM app_templates WHERE app_id = %(app_id)s ORDER BY kind, locale;

-- delete_template --
-- Remove one template of an app; a row back if there was one.
DELETE FROM app_templates
WHERE app_id = %(app_id)s AND kind = %(kind)s AND locale = %(locale)s
RETURNING kind;
