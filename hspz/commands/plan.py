"""`hspZ plan`: freeze the plan and the schedule for --gpus workers into one plan file (the
workflow's first step): one query, or a query list as `run --query-list` plans it.

    read -> freeze (every job) -> schedule -> plan file

With --index the plan is made from the index's records, and a --reference given beside it is
only named in the plan file (it must be a readable regular file): each work job verifies it
against the index in the background while its units run, as `run --index -r` does, and writes
no results until it matches (`commands.work`).  The plan has no engine to hide that check
behind, and it waited for it on the workflow's path.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from hspz.core.durable import check_regular, write_text
from hspz.core.errors import InputError
from hspz.formats import index as ix
from hspz.formats.planfile import PlanFile, PlanJob, plan_text
from hspz.io.readers import read_both, read_side
from hspz.planning.budget import devices_for
from hspz.run.freeze import load_manifest, prepare, schedule_for, write_dumps
from hspz.run.request import Request

if TYPE_CHECKING:
    from hspz.engine.contract import Backend
    from hspz.planning.schedule import Devices


def plan_command(
    req: Request, select: Callable[[], Backend], sizes: str | None = None, sizes_hits: bool = False
) -> int:
    """`hspZ plan`: freeze the plan and the schedule for --gpus workers into one file; with
    `sizes`, each work job's memory, and with `sizes_hits` its expected runtime from its
    units' seed hits too (`sizing`)."""
    _refuse_pipes(req)
    if req.index and req.reference:  # only named: the work jobs read and verify it
        check_regular(req.reference, "--reference")
    if req.query_list:
        pf, ref, idx, devices = _query_list_plan(req, select)
    else:
        pf, ref, idx, devices = _single_plan(req, select)
    write_text(req.output, plan_text(pf), "--output")
    if sizes:
        from hspz.commands import sizing

        rows = sizing.size_rows(
            pf, req.options, devices, ref, idx, lambda path: read_side(path, "query"), sizes_hits
        )
        sizing.write_sizes(sizes, rows)
    m = pf.manifest
    print(
        f"plan: {len(pf.jobs)} job(s), {len(m.plan.ref_bins)} reference bins, "
        f"{pf.axis.total} query bins, {len(pf.grid().units)} units, "
        f"{pf.schedule.workers} workers -> {req.output}",
        file=sys.stderr,
    )
    return 0


def _refuse_pipes(req: Request) -> None:
    """The reference and the query a plan names are read again by every work job: a pipe is
    refused before anything is read, never opened (nor waited on), as a query list's entries
    are (`query_list.planned_query`).  `-q FIFO` nobody writes to held the plan for ever;
    `-q <(cat q.fa)` was read whole and then refused when hashed, and `-r <(cat r.fa)` gave a
    plan naming /dev/fd/63, which no work job can read.  Anything else the readers word."""
    for flag, path in (("--reference", req.reference), ("--query", req.query)):
        if not path:
            continue  # no -r with an index; no -q with a query list
        try:
            fifo = stat.S_ISFIFO(os.stat(path).st_mode)
        except OSError:
            continue  # missing or unreadable: the readers say so
        if fifo:
            raise InputError(
                f"{flag}: {path} is a pipe: the work jobs read it again (give a regular file)"
            )


def _single_plan(
    req: Request, select: Callable[[], Backend]
) -> tuple[PlanFile, list, ix.Index | None, Devices]:
    """One query, planned as `run` plans it (from an index's records when given one)."""
    idx = None
    ref: list  # the records, or an index's KnownRecords
    if req.index:
        idx = ix.open_index(req.index)
        ix.check_options(idx, req.options)
        ref, qry = ix.known_records(idx), read_side(req.query, "query")
    else:
        assert req.reference is not None  # the CLI requires -r without --index
        ref, qry = read_both(req.reference, req.query)
    loaded = load_manifest(req, ref, qry)
    devices = devices_for(select(), req.options.gpus)
    m = prepare(req, devices, ref, qry, True, loaded)
    if idx is not None:
        ix.check_plan(idx, m.plan.ref_bins)
    write_dumps(req, m)
    sched = schedule_for(m, req.options.gpus, devices)
    size, sha = ix.file_sha256(req.query)
    job = PlanJob(1, os.path.abspath(req.query), size, sha, m)
    pf = PlanFile(
        sched,
        os.path.abspath(req.reference) if req.reference else None,
        os.path.abspath(req.index) if req.index else None,
        [job],
        False,
    )
    return pf, ref, idx, devices


def _query_list_plan(
    req: Request, select: Callable[[], Backend]
) -> tuple[PlanFile, list, ix.Index | None, Devices]:
    """The jobs of a query list, as `run --query-list` plans them (from an index's records
    when given one; its reference then only named)."""
    from hspz.commands.query_list import plan_query_list

    b = plan_query_list(replace(req, reference=None) if req.index else req, select)
    reference = os.path.abspath(req.reference) if req.reference else None
    index = os.path.abspath(req.index) if req.index else None
    return PlanFile(b.sched, reference, index, b.jobs, True), b.ref, b.index, b.devices
