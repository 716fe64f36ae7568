"""hspz.core.errors' `interrupts_held` and `resending_hook`: a signal whose handler runs inside C
code that calls back into Python (a ctypes callback, as llvmlite's are) is held, or sent again,
not lost."""

from __future__ import annotations

import os

import pytest


@pytest.mark.parametrize(
    ("sig", "raised"), [("SIGTERM", "Terminated"), ("SIGINT", "KeyboardInterrupt")]
)
def test_a_signal_inside_a_c_callback_is_held_not_lost(sig, raised):
    """`errors.interrupts_held`, around numba's load on the main thread (`backends.warm`): a
    SIGTERM or Ctrl-C whose handler runs inside a ctypes callback (as llvmlite's object-cache
    callbacks are) raises once the block ends.  Unheld, ctypes printed "Exception ignored" and
    dropped it: the run went on to its end with status 0 (2 of 72 runs killed at 0.26-0.55 s)."""
    import signal

    from hspz.core import errors

    before = signal.signal(signal.SIGTERM, errors.on_sigterm)
    try:
        with pytest.raises(BaseException) as caught:
            with errors.interrupts_held():
                seen = _signal_in_a_callback(sig)
                done = True
    finally:
        signal.signal(signal.SIGTERM, before)
    assert type(caught.value).__name__ == raised and done and seen


def _signal_in_a_callback(sig):
    """qsort from libc, whose comparison (a ctypes callback) sends `sig` on its first call."""
    import ctypes
    import signal

    seen = []

    @ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
    def compare(a, b):
        if not seen:
            seen.append(1)
            os.kill(os.getpid(), getattr(signal, sig))  # handled here, inside the callback
        return 0

    items = (ctypes.c_int * 4)(3, 1, 2, 0)
    ctypes.CDLL(None).qsort(items, 4, ctypes.sizeof(ctypes.c_int), compare)
    return seen


@pytest.mark.parametrize(
    ("sig", "raised"), [("SIGTERM", "Terminated"), ("SIGINT", "KeyboardInterrupt")]
)
def test_a_signal_that_a_c_callback_discarded_is_sent_again(sig, raised):
    """`errors.resending_hook`, the CLI's `sys.unraisablehook`: outside `interrupts_held` (numba
    taking a loop from its cache on the main thread, anywhere), a SIGTERM or Ctrl-C discarded by
    a ctypes callback is sent again and raised outside it.  Without the hook the run went on
    (one `--gpus 2` run of 300 killed ones finished with status 0)."""
    import signal
    import sys
    import time

    from hspz.core import errors

    before = signal.signal(signal.SIGTERM, errors.on_sigterm)
    hook = sys.unraisablehook
    sys.unraisablehook = errors.resending_hook(hook)
    try:
        with pytest.raises(BaseException) as caught:
            seen = _signal_in_a_callback(sig)
            time.sleep(2)  # the signal sent again is raised here
    finally:
        sys.unraisablehook = hook
        signal.signal(signal.SIGTERM, before)
    assert type(caught.value).__name__ == raised and seen
