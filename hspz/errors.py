"""Errors that end a command with one clear line.

`UsageError` and `InputError` exit with status 2 (bad flags, bad input); `RunError` with 1 (the run
itself failed).  The CLI catches `HspzError` and prints `hspZ: <message>` without a traceback unless
`HSPZ_DEBUG=1`.
"""


class HspzError(Exception):
    """Base class: a message for the user and an exit status."""

    status = 1


class UsageError(HspzError):
    """A flag value or combination of flags is invalid."""

    status = 2


class InputError(HspzError):
    """An input file is missing, unreadable or malformed."""

    status = 2


class RunError(HspzError):
    """The run failed after its inputs were accepted."""

    status = 1
