"""`hspZ run -q`: one query through the driver (`hspz.run.driver.drive`), and `-u`'s counts.

`OneQuery` is that run's stages: both inputs read here (or the query, and the reference's
index), one plan frozen, its worker processes started before the dumps, one job published.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING

from hspz.engine.contract import Backend, Context, prepare_query, prepare_reference
from hspz.formats import index as ix
from hspz.formats.manifest import Manifest
from hspz.io.packing import SMALL_BYTES
from hspz.io.readers import read_both, read_side
from hspz.io.records import Record
from hspz.planning import bins as planning
from hspz.planning.schedule import Devices, Schedule
from hspz.run.driver import Work, drive
from hspz.run.execute import Job
from hspz.run.freeze import (
    context_of,
    load_manifest,
    memory_estimate,
    prepare,
    schedule_for,
    sides_for,
    write_dumps,
)
from hspz.run.pool import Pool
from hspz.run.request import Request
from hspz.run.summary import Summary

if TYPE_CHECKING:
    from hspz.run.freeze import Sides


def run_command(req: Request, select: Callable[[], Backend]) -> int:
    """`hspZ run -q`: one query through the driver (`run.driver.drive`)."""
    drive(req, OneQuery(), select)
    return 0


class OneQuery(Work):
    """One query's stages: both sides read in this process (or the query, and the reference's
    index: its records not read, or verified in the background, and its bins loaded), one plan
    frozen (or replayed from --from-manifest) and published into OUT."""

    loaded: Manifest | None = None
    sides: Sides | None = None  # the records' seedable counts (CPU), once for both uses

    def read(self, req: Request) -> None:
        if req.index:
            self.index, self.ref, self.verify = ix.open_checked(
                req.index, req.options, req.reference
            )
            self.qry = read_side(req.query, "query")
        else:
            assert req.reference is not None  # the CLI requires -r without --index
            self.ref, self.qry = read_both(req.reference, req.query)
        assert self.qry is not None  # read in this process
        self.loaded = load_manifest(req, self.ref, self.qry)

    def freeze(self, req: Request, devices: Devices) -> list[Job]:
        assert self.qry is not None  # read in this process
        self.sides = sides_for(devices, self.ref, self.qry)  # the preflight's and --time's
        m = prepare(req, devices, self.ref, self.qry, False, self.loaded, self.sides)
        if self.index is not None:
            ix.check_plan(self.index, m.plan.ref_bins)
        return [Job(m, req.output, req.tarball, raw=req.dump_raw)]

    def count_only(self, req: Request, jobs: list[Job]) -> None:
        m = jobs[0].manifest
        write_dumps(req, m)
        assert self.qry is not None  # read in this process
        cpu_only(context_of(m), m.plan, self.ref, self.qry)

    def schedule(
        self, req: Request, jobs: list[Job], devices: Devices, summary: Summary
    ) -> Schedule:
        m = jobs[0].manifest
        sched = schedule_for(m, req.options.gpus, devices)
        if req.time:  # printed by --time only
            assert self.qry is not None  # read in this process
            summary.memory = memory_estimate(
                req.options, devices, m, self.ref, self.qry, self.sides
            )
        return sched

    def workers(
        self, sched: Schedule, engine: Backend, jobs: list[Job]
    ) -> Pool | nullcontext[None]:
        return worker_pool(sched, engine, jobs[0].manifest)

    def ready(self, req: Request, jobs: list[Job]) -> None:
        write_dumps(req, jobs[0].manifest)


def worker_pool(sched: Schedule, engine: Backend, m: Manifest) -> Pool | nullcontext[None]:
    """The worker processes of a schedule with several workers, one per scheduled worker
    (min(--gpus, reference bins)), started before the dumps and the shared records so that
    their start-up overlaps them; a null context for one worker (it runs in this process)."""
    if sched.workers < 2:
        return nullcontext()
    return Pool(sched.workers, engine, holds_large_bins(m))


def holds_large_bins(m: Manifest) -> bool:
    """Whether a bin of the plan packs `sequence.SMALL_BYTES` bases or more, which loads numba
    to prepare: worker processes then load it while the parent shares the records (a GPU
    worker otherwise loads it when its first large query bin is reverse-complemented)."""
    p = m.plan
    packed = [
        bp + len(b)
        for bins, lengths in ((p.ref_bins, m.ref_lengths), (p.query_bins, m.qry_lengths))
        for bp, b in zip(planning.bin_bp(bins, lengths), bins, strict=True)
    ]
    return max(packed, default=0) >= SMALL_BYTES


def cpu_only(
    ctx: Context, plan: planning.Plan, ref_records: Sequence[Record], qry_records: Sequence[Record]
) -> int:
    """`-u`: seed and hit counts after CPU preprocessing, without extending."""
    from hspz.engine.cpu import count_unit

    seeds = hits = 0
    queries = [
        prepare_query(ctx, q, [qry_records[i] for i in members])
        for q, members in enumerate(plan.query_bins)
    ]
    for r, members in enumerate(plan.ref_bins):
        ref = prepare_reference(ctx, r, [ref_records[i] for i in members])
        for qry in queries:
            s, h = count_unit(ctx, ref, qry)
            seeds += s
            hits += h
    print(f"#seeds: {seeds}", file=sys.stderr)
    print(f"#seed hits: {hits}", file=sys.stderr)
    return 0
