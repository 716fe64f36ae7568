"""Errors that end a command with one clear line.

`UsageError` and `InputError` exit with status 2 (bad flags, bad input); `RunError` with 1 (the run
itself failed).  The CLI catches `HspzError` and prints `hspZ: <message>` without a traceback unless
`HSPZ_DEBUG=1`.  `Terminated` is SIGTERM (a scheduler's time limit, `kill`) turned into an
exception, so that a terminated run cleans up as an interrupted one does (exit status 143);
`sigterm_held` keeps it out of a block that must not stop half-way (publishing the files);
`interrupts_held` keeps SIGTERM and SIGINT out of C code that would discard what they raise.
"""

import errno
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any


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


class Terminated(BaseException):
    """SIGTERM arrived.  A BaseException, like KeyboardInterrupt, so that no `except Exception`
    stops it on its way to the CLI; the stages' cleanup (`except BaseException`, `with`) runs."""


NO_THREAD = "can't start new thread"  # threading's RuntimeError when the system refuses one


def out_of_memory(exc: BaseException) -> str | None:
    """The one line for a resource the system refused: an allocation (numpy's MemoryError names
    the array; CPython's own has no text; an OSError ENOMEM) or a thread (threading's
    RuntimeError); None for any other exception."""
    if isinstance(exc, MemoryError):
        return f"out of memory: {str(exc) or 'an allocation failed'}"
    if isinstance(exc, RuntimeError) and str(exc) == NO_THREAD:
        return f"out of memory or of threads: {NO_THREAD}"
    if isinstance(exc, OSError) and exc.errno == errno.ENOMEM:
        return "out of memory" + (f": {exc.filename}" if exc.filename else "")
    return None


_held = {"depth": 0, "pending": False}


def on_sigterm(signum: int, frame: FrameType | None) -> None:
    """The SIGTERM handler the CLI installs: raise `Terminated`, or inside `sigterm_held`
    remember it for the block's end."""
    if _held["depth"]:
        _held["pending"] = True
    else:
        raise Terminated()


@contextmanager
def sigterm_held() -> Iterator[None]:
    """A SIGTERM arriving inside the block raises `Terminated` once the block has finished.
    Only in the main thread, where the handler runs: elsewhere the block is not held (a
    SIGTERM deferred to another thread's block would be raised in that thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _held["depth"] += 1
    try:
        yield
    finally:
        _held["depth"] -= 1
    if not _held["depth"] and _held["pending"]:
        _held["pending"] = False
        raise Terminated()


@contextmanager
def interrupts_held() -> Iterator[None]:
    """A SIGTERM or Ctrl-C (SIGINT) arriving inside the block raises once the block has
    finished (`sigterm_held`; SIGINT through the handler it had before), for a block that runs
    C code which calls back into Python and discards what the callback raises: llvmlite's
    object-cache callbacks, which numba's load runs.  A signal handled inside one was printed
    as "Exception ignored", and the run went on to its end with status 0.  Only in the main
    thread, where the handlers run."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    before = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        with sigterm_held():
            yield
    finally:
        signal.signal(signal.SIGINT, before)
    if caught and callable(before):
        before(signal.SIGINT, None)


def resending_hook(before: Callable[[Any], object]) -> Callable[[Any], None]:
    """A `sys.unraisablehook` that sends a SIGTERM or Ctrl-C whose exception C code discarded
    again 10 ms later: one handled inside a ctypes callback (llvmlite's, when numba takes a loop
    from its cache on the main thread, outside `interrupts_held`) was printed as "Exception
    ignored" and the run went on.  Sent again, it is raised outside the callback.  Any other
    exception goes to `before`."""

    def hook(unraisable: Any) -> None:
        kind = unraisable.exc_type
        if issubclass(kind, Terminated):
            sig = signal.SIGTERM
        elif issubclass(kind, KeyboardInterrupt):
            sig = signal.SIGINT
        else:
            before(unraisable)
            return
        timer = threading.Timer(0.01, os.kill, (os.getpid(), sig))
        timer.daemon = True
        timer.start()

    return hook


def in_flight() -> bool:
    """Whether an exception is on its way out (asked in a `finally`): threads are then not
    waited for, so that an interrupt is never held up by a thread blocked in a read (a FIFO
    nobody writes to: `hspZ run -r FIFO` could not be stopped by Ctrl-C or SIGTERM)."""
    return sys.exc_info()[0] is not None
