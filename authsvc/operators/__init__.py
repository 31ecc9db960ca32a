"""Operators of the console (SPEC §15): the role, sign-in, console sessions, the operator log.

No Flask here: the CLI (`authsvc operators`) and the console's pages share
these use cases, and each console action writes its log row in its own
transaction.
"""

# How long an emailed console sign-in code works, in seconds.
CONSOLE_CODE_TTL = 600
