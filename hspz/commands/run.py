"""`hspZ run`: read both inputs, freeze the plan, schedule it over the workers, run them, emit
the results in ordinal order and report."""

from __future__ import annotations

import os
import time
from contextlib import nullcontext

from hspz.budget import devices_for
from hspz.commands import Request
from hspz.execute import Execution, Summary, execute, print_counts, timed
from hspz.freeze import context_of, load_manifest, prepare, schedule_for, write_dumps
from hspz.inputs import read_both
from hspz.sequence import SMALL_BYTES
from hspz.workers import Pool


def run_command(req: Request, select) -> int:
    """`hspZ run`: read, plan, schedule, run the workers, emit, report.  `select()` picks the
    engine once the inputs have been read, so bad input is reported before backend notes."""
    t0 = time.perf_counter()
    summary = Summary()
    with early_pool(req) as pool:
        return _run(req, select, t0, summary, pool)


def early_pool(req: Request):
    """The worker processes of a `--gpus W` run (W > 1), started before reading the inputs so
    that their start-up overlaps it (BENCHMARKS.md); a null context otherwise."""
    if req.options.gpus < 2 or req.cpu_only:
        return nullcontext()
    engine = "hspz.engine.cpu" if req.options.backend == "cpu" else "hspz.engine.gpu"
    return Pool(req.options.gpus, engine, may_hold_large_bins([req.reference, req.query]))


def may_hold_large_bins(paths: list[str]) -> bool:
    """Whether an input may hold a bin of `sequence.SMALL_BYTES` bases, which loads numba to
    prepare (a 2bit or gzip file holds about 4 bases a byte): worker processes then load it
    while the parent reads (a GPU worker otherwise loads it when its first large query bin is
    reverse-complemented)."""
    def size(path: str) -> int:
        try:
            return os.path.getsize(path)
        except OSError:  # reported when the inputs are read
            return 0

    return any(4 * size(p) >= SMALL_BYTES for p in paths)


def _run(req: Request, select, t0: float, summary: Summary, pool) -> int:
    from hspz import report

    o = req.options
    with timed(summary.phases, "input"):
        ref, qry = read_both(req.reference, req.query)
    with timed(summary.phases, "plan"):
        loaded = load_manifest(req, ref, qry)
        engine = select()
        devices = devices_for(engine, o.gpus)
        m = prepare(req, devices, ref, qry, False, loaded)
    write_dumps(req, m)
    if req.cpu_only:
        return report.cpu_only(context_of(m), m.plan, ref, qry)
    sched = schedule_for(m, o.gpus, devices)
    how = Execution(req.output, req.tarball, o.diagonal_partition, bool(req.dump_raw),
                    req.hit_stats, report.progress_printer(), raw_path=req.dump_raw)
    execute(m, sched, engine.__name__, o.threads, ref, qry, how, t0, summary, pool)
    print_counts(summary)
    if req.time:
        report.print_time(summary, time.perf_counter() - t0)
    if req.hit_stats:
        report.print_hit_stats(summary.hit_stats)
    print(f"digest: {summary.digest}")
    return 0
