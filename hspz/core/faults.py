"""A test hook for the crash-safety and concurrency tests: `HSPZ_FAULT=POINT[:N[:stop]]` makes
the process SIGKILL itself (with `stop`: SIGSTOP, for the test to resume with SIGCONT) the N-th
time (the first, without `:N`) it reaches POINT, so a test can stop a run at an exact instant of
its work or of publishing.  Unset, as always outside those tests, it does nothing.  The points,
in the order a run reaches them:

    unit       the emitter accepted a unit's result (the work is under way)
    staged     every file of the run is staged and synced; no journal yet
    journal    the journal is written; nothing is moved yet
    publish    one file of the publish was moved into place (N: after the N-th)
    published  every file is moved and every stale file removed; the journal is still there
    done       the journal is removed; the stage folder is not yet

    batch-retired  a query-list run retired the older queries.tsv (a publish of its own, through the
                   points above); no job is published yet
    batch-swept    every job is published and the stale job entries removed; no queries.tsv

A roll-forward (`outdir.complete`) passes through `publish`, `published` and `done` too.
`hspZ work` has one more, `work-unit`: a finished unit's file is written (N: the N-th);
`hspZ index` one, `index-built`: every file of DIR.tmp is written, not yet renamed.
"""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter

_reached: Counter[str] = Counter()
_lock = threading.Lock()  # `hspZ merge` reaches `unit` on several threads


def point(name: str) -> None:
    """Reached `name`: SIGKILL (or SIGSTOP) this process when HSPZ_FAULT asks for this visit
    of it."""
    spec = os.environ.get("HSPZ_FAULT")
    if not spec:
        return
    want, *rest = spec.split(":")
    if want != name:
        return
    with _lock:
        _reached[name] += 1
        reached = _reached[name]
    if reached == int(rest[0] if rest else 1):
        os.kill(os.getpid(), signal.SIGSTOP if rest[1:] == ["stop"] else signal.SIGKILL)
