"""hspz.core.errors' `interrupts_held`: a signal whose handler runs inside C code that calls back
into Python is held, not lost."""

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
    import ctypes
    import signal

    from hspz.core import errors

    seen = []

    @ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
    def compare(a, b):
        if not seen:
            seen.append(1)
            os.kill(os.getpid(), getattr(signal, sig))  # handled here, inside the callback
        return 0

    items = (ctypes.c_int * 4)(3, 1, 2, 0)
    before = signal.signal(signal.SIGTERM, errors.on_sigterm)
    try:
        with pytest.raises(BaseException) as caught:
            with errors.interrupts_held():
                ctypes.CDLL(None).qsort(items, 4, ctypes.sizeof(ctypes.c_int), compare)
                done = True
    finally:
        signal.signal(signal.SIGTERM, before)
    assert type(caught.value).__name__ == raised and done and seen
