"""`hspZ run`: read both inputs (or the query, and the reference's index), freeze the plan,
schedule it over the workers, run them, emit the results in ordinal order and report.

    read -> freeze (manifest) -> schedule -> worker processes -> dumps -> workers -> emit
    -> report
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext

from hspz.core.progress import Progress
from hspz.engine.contract import Backend, Context, prepare_query, prepare_reference
from hspz.formats import index as ix
from hspz.formats.manifest import Manifest
from hspz.io.packing import SMALL_BYTES
from hspz.io.readers import read_both, read_side
from hspz.io.records import Record
from hspz.planning import bins as planning
from hspz.planning.budget import devices_for
from hspz.planning.schedule import Schedule
from hspz.run.execute import Execution, Job, Summary, execute, print_counts, timed
from hspz.run.freeze import (
    context_of,
    load_manifest,
    memory_estimate,
    prepare,
    schedule_for,
    write_dumps,
)
from hspz.run.pool import Pool
from hspz.run.report import say
from hspz.run.request import Request


def run_command(req: Request, select: Callable[[], Backend]) -> int:
    """`hspZ run`: read, plan, schedule, run the workers, emit, report.  `select()` picks the
    engine once the inputs have been read, so bad input is reported before backend notes.
    With an index the reference is not read (or verified in the background) and its bins
    are loaded."""
    t0 = time.perf_counter()
    summary = Summary()
    o = req.options
    idx = verify = None
    ref: list  # the records, or an index's KnownRecords
    with timed(summary.phases, "input"):
        if req.index:
            idx, ref, verify = ix.open_checked(req.index, o, req.reference)
            qry = read_side(req.query, "query")
        else:
            assert req.reference is not None  # the CLI requires -r without --index
            ref, qry = read_both(req.reference, req.query)
    try:
        return _planned(req, select, t0, summary, ref, qry, idx, verify)
    finally:
        if verify is not None:
            verify.close()


def _planned(req: Request, select: Callable[[], Backend], t0: float, summary: Summary,
             ref: list[Record], qry: list[Record], idx: ix.Index | None,
             verify: ix.Verification | None) -> int:

    o = req.options
    with timed(summary.phases, "plan"):
        loaded = load_manifest(req, ref, qry)
        engine = select()
        devices = devices_for(engine, o.gpus)
        m = prepare(req, devices, ref, qry, False, loaded)
        if idx is not None:
            ix.check_plan(idx, m.plan.ref_bins)
    if req.cpu_only:
        write_dumps(req, m)
        return cpu_only(context_of(m), m.plan, ref, qry)
    sched = schedule_for(m, o.gpus, devices)
    if req.time:  # printed by --time only: it counts the records' seedable bases again
        summary.memory = memory_estimate(o, devices, m, ref, qry)
    if idx is not None:
        say(index_using_line(idx, req.reference))
    with worker_pool(sched, engine, m) as pool:
        write_dumps(req, m)
        how = Execution(o.diagonal_partition, bool(req.dump_raw), req.hit_stats,
                        Progress(len(m.plan.units)), index=req.index, verify=verify)
        execute([Job(m, req.output, req.tarball, raw=req.dump_raw)], sched, engine,
                o.threads, ref, qry, how, t0, summary, pool)
        if idx is not None:
            say(index_loaded_line(idx, summary, req.reference))
        _report(req, summary, t0)
    return 0


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
    packed = [bp + len(b) for bins, lengths in ((p.ref_bins, m.ref_lengths),
                                                 (p.query_bins, m.qry_lengths))
              for bp, b in zip(planning.bin_bp(bins, lengths), bins, strict=True)]
    return max(packed, default=0) >= SMALL_BYTES


def index_using_line(idx: ix.Index, reference: str | None) -> str:
    m = idx.manifest
    check = (f"reference {reference} verified in the background" if reference else
             "no reference given: the index is trusted, its pieces still verified as they load")
    return (f"index: using {idx.path} ({len(m.bins)} bin(s) of {len(m.names)} record(s), "
            f"seed {m.pattern}, step {m.step}, -B {m.seq_block_size}"
            f"{', --kegalign-bins' if m.kegalign_bins else ''}); {check}")


def index_loaded_line(idx: ix.Index, summary: Summary, reference: str | None) -> str:
    loads = sum(r.loads for r in summary.reports)
    assert summary.schedule is not None  # set once the run is scheduled
    visited = [v.ref_bin for vs in summary.schedule.visits for v in vs]
    size = sum(e.length * ix.ARRAYS[name].itemsize for b in visited
               for (bb, name), e in idx.manifest.arrays.items() if bb == b)
    line = (f"index: loaded {loads} bin(s) ({size / 2**30:.2f} GiB), every 64 MiB piece "
            f"matching its checksum")
    if reference:
        line += (f"; {reference} matches the index (records hash "
                 f"{idx.manifest.records_digest[:16]}…)")
    return line


def _report(req: Request, summary: Summary, t0: float) -> None:
    from hspz.run import report

    print_counts(summary)
    if req.time:
        report.print_time(summary, time.perf_counter() - t0)
    if req.hit_stats:
        assert summary.hit_stats is not None  # kept when asked for
        report.print_hit_stats(summary.hit_stats)
    print(f"digest: {summary.digest}")


def cpu_only(ctx: Context, plan: planning.Plan, ref_records: Sequence[Record],
             qry_records: Sequence[Record]) -> int:
    """`-u`: seed and hit counts after CPU preprocessing, without extending."""
    from hspz.engine.cpu import count_unit

    seeds = hits = 0
    queries = [prepare_query(ctx, q, [qry_records[i] for i in members])
               for q, members in enumerate(plan.query_bins)]
    for r, members in enumerate(plan.ref_bins):
        ref = prepare_reference(ctx, r, [ref_records[i] for i in members])
        for qry in queries:
            s, h = count_unit(ctx, ref, qry)
            seeds += s
            hits += h
    print(f"#seeds: {seeds}", file=sys.stderr)
    print(f"#seed hits: {hits}", file=sys.stderr)
    return 0
