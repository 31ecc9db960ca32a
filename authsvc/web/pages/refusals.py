"""The accounts' refusals (a weak password, an unusable address) in the page's language.

The use cases say why they refuse in English sentences, for the API (whose
`detail` stays English) and the logs; a page shows the same reason in its own
language. The sentences are matched whole, so a reworded rule shows its new
English words rather than a stale translation; a reason only the address
parser's library gives is said generically in any other language.
"""

from __future__ import annotations

from babel.support import LazyProxy

from authsvc.accounts.addresses import MAX_ADDRESS_LENGTH, InvalidAddress
from authsvc.accounts.passwords import MAX_LENGTH, MIN_LENGTH, WeakPassword
from authsvc.web.pages.i18n import gettext
from authsvc.web.pages.i18n import lazy_gettext as _l
from authsvc.web.pages.i18n import lazy_ngettext as _ln
from authsvc.web.pages.language import page_locale

_KNOWN: dict[str, LazyProxy] = {
    # authsvc.accounts.passwords.check_password_policy
    "The password must be text.": _l("The password must be text."),
    f"Use at least {MIN_LENGTH} characters.": _ln("Use at least %(num)s character.",
                                                   "Use at least %(num)s characters.",
                                                   MIN_LENGTH),
    f"Use at most {MAX_LENGTH} characters.": _ln("Use at most %(num)s character.",
                                                  "Use at most %(num)s characters.", MAX_LENGTH),
    "The password cannot contain control characters.":
        _l("The password cannot contain control characters."),
    "This password is too common; choose another.":
        _l("This password is too common; choose another."),
    "The password cannot be your email address.":
        _l("The password cannot be your email address."),
    # authsvc.accounts.addresses.parse_address
    "The email address must be a string.": _l("Enter an email address."),
    "Enter an email address.": _l("Enter an email address."),
    f"The email address is longer than {MAX_ADDRESS_LENGTH} characters.":
        _ln("The email address is longer than %(num)s character.",
            "The email address is longer than %(num)s characters.", MAX_ADDRESS_LENGTH),
    "The email address contains an invisible character.":
        _l("The email address contains an invisible character."),
    "The email address may not contain % or !.":
        _l("The email address may not contain %% or !."),
}


def translated_refusal(error: WeakPassword | InvalidAddress) -> str:
    """Why the use case refused, in the page's language."""
    reason = str(error)
    known = _KNOWN.get(reason)
    if known is not None:
        return str(known)
    if page_locale() == "en" or isinstance(error, WeakPassword):
        return reason
    return gettext("This is not a valid email address. Check it for typing mistakes.")
