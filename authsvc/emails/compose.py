"""The one render path of every email (SPEC §14): a template is three parts compiled once,
then filled per message.

A built-in template (templates/email, translated through the `emails`
catalog) and an app's own (checked by sandbox.check_template) compile to
the same EmailTemplate, and every email renders through render_parts.
Compiling runs the template once with a marker in place of each per-message
value and splits the output around the markers; a message then only joins
the static pieces with its (HTML-escaped) values. That is what Jinja would
render for any template whose output depends on its values only by printing
them: the built-in ones (translation happens at compile time, per locale)
and apps' templates made only of text and `{{ name }}` holes. An app's
template with `if` or filters renders through Jinja's sandbox, bounded in
time and size (sandbox.bounded_render).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache

import jinja2
from markupsafe import escape

from authsvc.emails import sandbox
from authsvc.locales import text_direction, translations
from authsvc.resources import templates_dir

Render = Callable[[Mapping[str, object]], str]
DOMAIN = "emails"

# Every value that differs from one message to the next: holes in a compiled
# template. Everything else a template prints is fixed per kind, locale, brand
# and settings, and compiled in (a template is compiled once for each).
HOLES = (
    "email", "link", "code", "code_url", "expires_in", "expires_at", "requested_by",
    "new_email_masked", "restored_email_masked",
)
_MARKER = re.compile("\x00([0-9]+)\x00")
# What an app's HTML gets around it when it is not a whole document: the email's
# language and direction are said on every email (SPEC §14).
_DOCUMENT_START = re.compile(r"\s*(<!doctype|<html)", re.IGNORECASE)


def _subject_line(value: str) -> str:
    """A subject is one header line: breaks and runs of space become one space."""
    return " ".join(value.split())


@dataclass(frozen=True)
class EmailTemplate:
    """An email's three parts, ready to fill: built-in, or an app's (`app_owned`)."""

    kind: str
    locale: str  # what Content-Language and <html lang> say
    subject: Render
    text: Render
    html: Render
    app_owned: bool = False


def flatten(template: jinja2.Template, constants: Mapping[str, object], *, html: bool,
            bound: bool = False) -> Render:
    """`template` as static pieces around its HOLES (see the module docstring).

    `bound`: refuse (sandbox.RenderLimit) an output over the sandbox's size
    bound; an app's plain template can repeat a hole thousands of times.
    """
    markers = {name: f"\x00{at}\x00" for at, name in enumerate(HOLES)}
    output = template.render({**constants, **markers})
    split = _MARKER.split(output)
    pieces: list[str] = []
    holes: list[tuple[int, str]] = []  # (where in pieces, the name whose value goes there)
    for at, piece in enumerate(split):
        if at % 2:
            holes.append((len(pieces), HOLES[int(piece)]))
            pieces.append("")
        elif piece:
            pieces.append(piece)
    show: Callable[[object], str] = escape if html else str
    limit = sandbox.MAX_OUTPUT_CHARS

    def render(context: Mapping[str, object]) -> str:
        # The static pieces copied, the holes filled in place: a few µs per
        # email against Jinja's render (bench/pipeline_parts.py, "templates").
        out = pieces.copy()
        for at, hole in holes:
            out[at] = show(context[hole])  # a missing value raises KeyError, as StrictUndefined
        joined = "".join(out)
        if bound and len(joined) > limit:
            raise sandbox.RenderLimit(f"output over {limit} characters")
        return joined

    return render


def render_parts(template: EmailTemplate, context: Mapping[str, object]) -> tuple[str, str, str]:
    """(subject, text, html) of `template` for one message: the one render path.

    An app's template that fails in a way its checks did not foresee fails as
    sandbox.RenderLimit, which the worker answers with the built-in template.
    """
    if not template.app_owned:
        return template.subject(context), template.text(context), template.html(context)
    try:
        html = template.html(context)
        subject, text = template.subject(context), template.text(context)
    except (sandbox.RenderLimit, jinja2.TemplateError, KeyError, TypeError, ValueError):
        raise
    except Exception as exc:  # RecursionError, MemoryError, …: the email still goes
        raise sandbox.RenderLimit(f"{type(exc).__name__}: {exc}") from exc
    return _subject_line(subject), text, _with_language(html, template.locale)


# An app's HTML part's own start: a doctype, then perhaps its <html> start tag.
_DOCTYPE = re.compile(r"\s*<!doctype[^>]*>", re.IGNORECASE)
_HTML_START = re.compile(r"\s*<html(?=[\s>/])([^>]*)>", re.IGNORECASE)


def _has_attribute(attributes: str, name: str) -> bool:
    return re.search(rf"(?:^|[\s/]){name}\s*=", attributes, re.IGNORECASE) is not None


def _with_language(html: str, locale: str) -> str:
    """An app's HTML part as a document whose root says its language and direction
    (SPEC §14 `<html lang dir>`): wrapped in one when it is a fragment, the attributes
    it leaves out added to the root it has."""
    language = {"lang": locale, "dir": text_direction(locale)}
    if _DOCUMENT_START.match(html) is None:
        return (f'<!doctype html>\n<html lang="{language["lang"]}" dir="{language["dir"]}">'
                f"\n<body>\n{html}\n</body>\n</html>\n")
    doctype = _DOCTYPE.match(html)
    at = doctype.end() if doctype else 0
    root = _HTML_START.match(html, at)
    attributes = root.group(1) if root else ""
    added = "".join(f' {name}="{value}"' for name, value in language.items()
                    if not _has_attribute(attributes, name))
    if root is None:  # a doctype, then the body's content: the root is implied
        return f"{html[:at]}<html{added}>{html[at:]}"
    # Before the tag's end ("/>" keeps its slash last).
    end = root.end() - 1 - (1 if attributes.endswith("/") else 0)
    return html[:end] + added + html[end:]


# --- built-in templates ------------------------------------------------------------

# Marked for the catalog (pybabel extract -k N_); translated where they are used.
def N_(message: str) -> str:
    return message


# Before a preview's subject (`authsvc templates preview`).
PREVIEW_PREFIX = N_("[Preview]")
SUBJECTS = {
    "verify": N_("Confirm your email address"),
    "reset": N_("Reset your password"),
    "account_exists": N_("You already have an account"),
    "password_changed": N_("Your password was changed"),
    "email_change": N_("Confirm your new email address"),
    "email_change_approval": N_("Approve changing your account's email address"),
    "email_in_use": N_("An account already uses this address"),
    "email_changed": N_("Your account's email address was changed"),
    "email_restored": N_("This address no longer signs in to your account"),
    "account_delete": N_("Confirm deleting your account"),
    "sign_in": N_("Your sign-in link"),
    "no_account": N_("No account uses this address"),
    "console_code": N_("Your operator console sign-in code"),
}


def translate(locale: str, message: str) -> str:
    """`message` in `locale`, from the emails catalog."""
    return translations(locale, DOMAIN).gettext(message)


@lru_cache(maxsize=32)
def _environment(locale: str, html: bool) -> jinja2.Environment:
    """The built-in templates' environment for one locale: its catalog installed."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir() / "email")),
        autoescape=html, undefined=jinja2.StrictUndefined,  # noqa: S701 - text parts are not HTML
        extensions=["jinja2.ext.i18n"], keep_trailing_newline=True,
    )
    env.policies["ext.i18n.trimmed"] = True  # a paragraph is one msgid, however it is wrapped
    env.install_gettext_translations(translations(locale, DOMAIN), newstyle=False)  # type: ignore[attr-defined]
    return env


def builtin_template(kind: str, locale: str, constants: Mapping[str, object]) -> EmailTemplate:
    """The built-in `kind` in `locale`, compiled with `constants` (the service's URLs, the
    brand's values: wording.brand_values)."""
    fixed = {**constants, "locale": locale, "dir": text_direction(locale)}
    subject = translate(locale, SUBJECTS[kind])
    return EmailTemplate(
        kind, locale, lambda _context: subject,
        flatten(_environment(locale, False).get_template(f"{kind}.txt"), fixed, html=False),
        flatten(_environment(locale, True).get_template(f"{kind}.html"), fixed, html=True),
    )


# --- apps' templates ---------------------------------------------------------------

def _app_part(part: sandbox.CompiledPart, constants: Mapping[str, object], *,
              html: bool) -> Render:
    if part.plain:
        return flatten(part.template, constants, html=html, bound=True)
    bounded = sandbox.bounded_render(part.template)
    return lambda context: bounded({**constants, **context})


def app_template(kind: str, locale: str, subject: str, text: str, html: str,
                 constants: Mapping[str, object]) -> EmailTemplate:
    """An app's stored template, compiled in the sandbox (checked again: never trusted),
    with `constants`: its brand's values (wording.brand_values)."""
    parts = sandbox.compile_template(subject, text, html)
    fixed = {**constants, "locale": locale}
    return EmailTemplate(kind, locale, _app_part(parts["subject"], fixed, html=False),
                         _app_part(parts["text"], fixed, html=False),
                         _app_part(parts["html"], fixed, html=True), app_owned=True)
