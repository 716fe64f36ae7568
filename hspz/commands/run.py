"""`hspZ run`: read both inputs, freeze the plan, schedule it over the workers, run them, emit
the results in ordinal order and report."""

from __future__ import annotations

import time
from contextlib import nullcontext

from hspz import plan as planning
from hspz.budget import devices_for
from hspz.commands import Request
from hspz.execute import Execution, Summary, execute, print_counts, timed
from hspz.freeze import (
    context_of,
    load_manifest,
    memory_estimate,
    prepare,
    schedule_for,
    write_dumps,
)
from hspz.inputs import read_both
from hspz.manifest import Manifest
from hspz.schedule import Schedule
from hspz.sequence import SMALL_BYTES
from hspz.workers import Pool


def run_command(req: Request, select) -> int:
    """`hspZ run`: read, plan, schedule, run the workers, emit, report.  `select()` picks the
    engine once the inputs have been read, so bad input is reported before backend notes."""
    from hspz import report

    t0 = time.perf_counter()
    summary = Summary()
    o = req.options
    with timed(summary.phases, "input"):
        ref, qry = read_both(req.reference, req.query)
    with timed(summary.phases, "plan"):
        loaded = load_manifest(req, ref, qry)
        engine = select()
        devices = devices_for(engine, o.gpus)
        m = prepare(req, devices, ref, qry, False, loaded)
    if req.cpu_only:
        write_dumps(req, m)
        return report.cpu_only(context_of(m), m.plan, ref, qry)
    sched = schedule_for(m, o.gpus, devices)
    summary.memory = memory_estimate(o, devices, m)
    with worker_pool(sched, engine.__name__, m) as pool:
        write_dumps(req, m)
        how = Execution(req.output, req.tarball, o.diagonal_partition, bool(req.dump_raw),
                        req.hit_stats, report.progress_printer())
        execute(m, sched, engine.__name__, o.threads, ref, qry, how, t0, summary, pool)
        _report(req, summary, t0)
    return 0


def worker_pool(sched: Schedule, engine: str, m: Manifest):
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


def _report(req: Request, summary: Summary, t0: float) -> None:
    from hspz import report

    print_counts(summary)
    if req.dump_raw:
        report.write_raw(req.dump_raw, summary)
    if req.time:
        report.print_time(summary, time.perf_counter() - t0)
    if req.hit_stats:
        report.print_hit_stats(summary.hit_stats)
    print(f"digest: {summary.digest}")
