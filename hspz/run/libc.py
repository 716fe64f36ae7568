"""What a worker asks of libc and the kernel: returning freed heap to the system (malloc_trim), its
peak resident set, and SIGKILL when its parent dies (PR_SET_PDEATHSIG)."""

from __future__ import annotations

import ctypes
import functools
import os
import resource
import signal
import sys


def release_free_memory() -> None:
    """Hand the C heap's free pages back to the kernel (glibc `malloc_trim`; elsewhere
    nothing).  Each unit runs its seed batches on threads of its own, each thread's malloc arena
    keeps what its seed batches freed, and the next unit's threads may take other arenas: the
    simulated 24 x 4 Mbp pair at -B 8M -t 2 peaked at 857 MiB, 635 MiB with a trim after each
    unit (the estimate says 618)."""
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is not None:
        trim(0)


@functools.cache
def _libc():
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def peak_rss_kib() -> int:
    """This process's peak resident set size in KiB: VmHWM, the high-water mark of its own
    memory since it was exec'd.  (`ru_maxrss` also holds the RSS of the process it was
    started from: Linux records the old address space's mark at exec, so a worker spawned by
    a parent holding the inputs, or hspZ started from a large Python process, would report
    theirs.)"""
    try:
        for line in open("/proc/self/status", encoding="ascii"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def die_with_parent(parent: int) -> None:
    """Have the kernel SIGKILL this process when its parent dies (Linux PR_SET_PDEATHSIG;
    nothing a worker holds needs more cleanup than the kernel gives it), and exit now when the
    parent already died before the request (this process was reparented)."""
    if sys.platform.startswith("linux") and _libc() is not None:
        _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
