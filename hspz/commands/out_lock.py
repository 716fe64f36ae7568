"""`hspZ run` into OUT under its lock: OUT is locked (created, proven writable) before any work,
and the lock is held until the run, or each job of a query list, has published and printed its
digest (`outdir.OutLock`).  -u writes nothing in OUT, so it takes no lock."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from hspz.core.options import Options
from hspz.run import outdir
from hspz.run.request import Request


@contextmanager
def warming(
    backend: str, numba: bool = True, engine: bool = True, options: Options | None = None
) -> Iterator[None]:
    """The backend started in the background while the block reads and plans
    (`engine.backends.warm`; without `engine`, a plan's: the CUDA driver alone), and joined
    when it ends normally; the CPU backend's numba (`numba`) is loaded before the block, on
    this thread.
    An error, Ctrl-C or SIGTERM in the block is not held until the start ends (the thread is a
    daemon; the exit ends it): a slow or hung CUDA driver kept `hspZ plan` from reporting a bad
    input, and from stopping, for as long as the start took."""
    from hspz.engine import backends

    thread = backends.warm(backend, numba, engine, options)
    yield  # an exception raised in the block leaves here, past the join
    if thread is not None:
        thread.join()


def run_in_out(
    req: Request, wait: bool, holder: str, select: Callable, ready: Callable[[], None]
) -> int:
    """Take OUT's lock (`wait` as --wait gives it; `holder`: the command line the lock
    records), run `ready` once OUT exists (the checks of files that may lie in it), then the
    run or the query list.  -u: `ready`, then the counts, without the lock."""
    from hspz.commands.run import run_command

    if req.cpu_only:
        ready()
        return run_command(req, select)
    with outdir.OutLock(req.output, "--output", wait, holder, keep_empty=req.tarball is None):
        ready()
        if req.query_list:
            from hspz.commands.query_list import query_list_command, tarball_note
            from hspz.run.job_entries import check_entries
            from hspz.run.report import say

            check_entries(Path(os.path.abspath(req.output)))
            say([note] if (note := tarball_note(req)) else [])
            return query_list_command(req, select)
        return run_command(req, select)
