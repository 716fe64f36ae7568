"""`hspZ run`: read both inputs, freeze the plan, schedule it over the workers, run them, emit
the results in ordinal order and report."""

from __future__ import annotations

import os
import time
from contextlib import nullcontext

from hspz import index as ix
from hspz.budget import devices_for
from hspz.commands import Request
from hspz.execute import Execution, Job, Summary, execute, print_counts, timed
from hspz.freeze import context_of, load_manifest, prepare, schedule_for, write_dumps
from hspz.inputs import read_both, read_side
from hspz.progress import Progress
from hspz.report import say
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
    return Pool(req.options.gpus, engine,
                may_hold_large_bins([p for p in (req.reference, req.query) if p]))


def index_using_line(idx, reference: str | None) -> str:
    m = idx.manifest
    check = (f"reference {reference} verified in the background" if reference else
             "no reference given: the index is trusted, its pieces still verified as they load")
    return (f"index: using {idx.path} ({len(m.bins)} bin(s) of {len(m.names)} record(s), "
            f"seed {m.pattern}, step {m.step}, -B {m.seq_block_size}"
            f"{', --kegalign-bins' if m.kegalign_bins else ''}); {check}")


def index_loaded_line(idx, summary: Summary, reference: str | None) -> str:
    loads = sum(r.loads for r in summary.reports)
    visited = [v.ref_bin for vs in summary.schedule.visits for v in vs]
    size = sum(e.length * ix.ARRAYS[name].itemsize for b in visited
               for (bb, name), e in idx.manifest.arrays.items() if bb == b)
    line = (f"index: loaded {loads} bin(s) ({size / 2**30:.2f} GiB), every 64 MiB piece "
            f"matching its checksum")
    if reference:
        line += (f"; {reference} matches the index (records hash "
                 f"{idx.manifest.records_digest[:16]}…)")
    return line


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
    o = req.options
    idx = verify = None
    with timed(summary.phases, "input"):
        if req.index:
            idx = ix.open_index(req.index)
            ix.check_options(idx, o)
            verify = ix.Verification(req.reference, idx) if req.reference else None
            ref, qry = ix.known_records(idx), read_side(req.query, "query")
        else:
            ref, qry = read_both(req.reference, req.query)
    try:
        return _planned(req, select, t0, summary, pool, ref, qry, idx, verify)
    finally:
        if verify is not None:
            verify.close()


def _planned(req: Request, select, t0: float, summary: Summary, pool, ref, qry, idx,
             verify) -> int:
    from hspz import report

    o = req.options
    with timed(summary.phases, "plan"):
        loaded = load_manifest(req, ref, qry)
        engine = select()
        devices = devices_for(engine, o.gpus)
        m = prepare(req, devices, ref, qry, False, loaded)
        if idx is not None:
            ix.check_plan(idx, m.plan.ref_bins)
    write_dumps(req, m)
    if req.cpu_only:
        return report.cpu_only(context_of(m), m.plan, ref, qry)
    sched = schedule_for(m, o.gpus, devices)
    if idx is not None:
        say(index_using_line(idx, req.reference))
    how = Execution(o.diagonal_partition, bool(req.dump_raw), req.hit_stats,
                    Progress(len(m.plan.units)), index=req.index, verify=verify)
    execute([Job(m, req.output, req.tarball, raw=req.dump_raw)], sched, engine.__name__,
            o.threads, ref, qry, how, t0, summary, pool)
    if idx is not None:
        say(index_loaded_line(idx, summary, req.reference))
    print_counts(summary)
    if req.time:
        report.print_time(summary, time.perf_counter() - t0)
    if req.hit_stats:
        report.print_hit_stats(summary.hit_stats)
    print(f"digest: {summary.digest}")
    return 0
