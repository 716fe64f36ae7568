"""`hspZ run` into OUT under its lock: OUT is locked (created, proven writable) before any work,
and the lock is held until the run, or each job of a query list, has published and printed its
digest (`outdir.OutLock`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from hspz.run import outdir
from hspz.run.request import Request


def run_in_out(req: Request, output: str, wait: bool, holder: str, select: Callable,
               ready: Callable[[], None]) -> int:
    """Take OUT's lock (`wait` as --wait gives it; `holder`: the command line the lock
    records), run `ready` once OUT exists (the checks of files that may lie in it), then the
    run or the query list."""
    with outdir.OutLock(output, "--output", wait, holder, keep_empty=req.tarball is None):
        ready()
        if req.query_list:
            from hspz.commands.query_list import batch_command, tarball_note
            from hspz.run.job_entries import check_entries
            from hspz.run.report import say

            check_entries(Path(os.path.abspath(output)))
            say([note] if (note := tarball_note(req)) else [])
            return batch_command(req, select)
        from hspz.commands.run import run_command

        return run_command(req, select)
