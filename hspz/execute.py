"""Executing a frozen job: the schedule's workers run their units (`hspz.workers`), the emitter
replays the results in ordinal order into OUT, and the summary gathers counts, phases and the
unit ledger for the report."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from hspz import estimate
from hspz import plan as planning
from hspz import schedule as scheduling
from hspz.budget import devices_for, per_worker_threads, resolve_max_hits
from hspz.emit import Emitter
from hspz.engine import UnitResult
from hspz.errors import RunError
from hspz.freeze import context_of
from hspz.inputs import Inputs, table_lookup
from hspz.manifest import Manifest
from hspz.options import Options
from hspz.report import say
from hspz.scoring import resolve_matrix
from hspz.sequence import Record
from hspz.workers import Pool, WorkerJob, WorkerReport, run_workers


@dataclass
class Summary:
    seeds: int = 0
    hits: int = 0
    raw_hsps: int = 0
    hsps: int = 0
    digest: str = ""
    results: list = field(default_factory=list)  # UnitResults, kept only for --dump-raw
    phases: dict = field(default_factory=dict)
    ledger: list = field(default_factory=list)  # per emitted unit: its ledger row
    reports: list = field(default_factory=list)  # WorkerReports
    hit_stats: estimate.HitHistogram | None = None
    manifest: Manifest | None = None
    schedule: scheduling.Schedule | None = None
    memory: planning.HostEstimate | None = None  # the CPU preflight's estimate (`--time`)


@contextmanager
def timed(phases: dict, name: str):
    """Add the wall-clock seconds of the block to `phases[name]`."""
    t = time.perf_counter()
    try:
        yield
    finally:
        phases[name] = phases.get(name, 0.0) + time.perf_counter() - t


@dataclass
class Execution:
    """How to run a frozen job: where results go and what to keep."""

    outdir: str | Path
    tarball: str | Path | None = None
    diagonal: bool = False
    keep_raw: bool = False  # the engine keeps pre-dedup HSPs (--dump-raw)
    hit_stats: bool = False
    progress: object = None
    keep_results: bool = False  # Summary.results holds every UnitResult (--dump-raw, library)


def worker_jobs(m: Manifest, sched: scheduling.Schedule, engine_name: str, threads: int,
                t0: float, keep_raw: bool = False, hit_stats: bool = False) -> list[WorkerJob]:
    ctx = context_of(m, keep_raw)
    per = per_worker_threads(threads, sched.workers)
    return [WorkerJob(k, sched.devices[k], sched.visits[k], ctx, m.plan, engine_name, per, t0,
                      hit_stats) for k in range(sched.workers)]


def ledger_row(m: Manifest, r: UnitResult, label: str) -> dict:
    rbp = planning.bin_bp(m.plan.ref_bins, m.ref_lengths)[r.ref_bin]
    qbp = planning.bin_bp(m.plan.query_bins, m.qry_lengths)[r.query_bin]
    return dict(ordinal=r.ordinal, worker=r.worker, device=label, ref_bin=r.ref_bin,
                query_bin=r.query_bin, ref_bp=rbp, query_bp=qbp, gpu_ms=r.gpu_ms,
                host_start_ms=r.host_start_ms, host_end_ms=r.host_end_ms, seeds=r.seeds,
                hits=r.hits, raw_hsps=r.raw_hsps, hsps=r.hsps)


def execute(m: Manifest, sched: scheduling.Schedule, engine_name: str, threads: int,
            ref: list[Record], qry: list[Record], how: Execution, t0: float | None = None,
            summary: Summary | None = None, pool: Pool | None = None) -> Summary:
    """Run every worker of the schedule and emit their results in ordinal order."""
    summary = summary or Summary()
    summary.manifest, summary.schedule = m, sched
    t0 = time.perf_counter() if t0 is None else t0
    labels = dict(enumerate(sched.labels))
    total = len(m.plan.units)

    def emitted(result: UnitResult) -> None:
        summary.ledger.append(ledger_row(m, result, labels.get(result.worker, "")))
        if how.keep_results or how.keep_raw:
            summary.results.append(result)
        if how.progress:
            how.progress(result, total)

    emitter = Emitter(m.plan.units, table_lookup(m), how.outdir, how.tarball, how.diagonal,
                      emitted)
    summary.hit_stats = estimate.HitHistogram() if how.hit_stats else None

    def sink(result: UnitResult, extras) -> None:
        if extras is not None and summary.hit_stats is not None:
            summary.hit_stats.merge(extras)
        emitter.add(result)

    jobs = worker_jobs(m, sched, engine_name, threads, t0, how.keep_raw, how.hit_stats)
    try:
        with timed(summary.phases, "workers"):
            summary.reports = run_workers(jobs, ref, qry, sink, pool)
        with timed(summary.phases, "publish"):
            summary.digest = emitter.finish()
    except BaseException:
        emitter.abort()
        raise
    say_removed(emitter)
    check_lifecycle(summary.reports, sched)
    for key, value in emitter.counts.items():
        setattr(summary, key, value)
    return summary


def check_lifecycle(reports: list[WorkerReport], sched: scheduling.Schedule) -> None:
    """builds + loads = uploads = Σ visits, and every planned unit ran once."""
    builds = sum(r.builds for r in reports)
    uploads = sum(r.uploads for r in reports)
    units = sum(r.units for r in reports)
    planned = sum(v.units for vs in sched.visits for v in vs)
    if not builds == uploads == sched.total_visits or units != planned:
        raise RunError(f"lifecycle mismatch: {builds} builds, {uploads} uploads, "
                       f"{sched.total_visits} visits, {units} of {planned} units")


def run(options: Options, inputs: Inputs, outdir: str | Path, engine, tarball=None,
        progress=None) -> Summary:
    """Run `inputs.plan` through `engine` into `outdir` (the in-library entry point used by
    `compare` and `benchmark`): --gpus workers, no manifest, no preflight."""
    devices = devices_for(engine, options.gpus)
    matrix = resolve_matrix(options.xdrop, options.scoring, options.ambiguous)
    resolved = options.replace(max_hits=resolve_max_hits(options, devices))
    p = inputs.plan
    m = Manifest(resolved, matrix, p, [r.name for r in inputs.reference],
                 [len(r) for r in inputs.reference], [r.name for r in inputs.query],
                 [len(r) for r in inputs.query], "-", "-")
    ref_bp = planning.bin_bp(p.ref_bins, m.ref_lengths)
    sched = scheduling.make_schedule(p, ref_bp, options.gpus, devices,
                                     scheduling.partition_knob())
    return execute(m, sched, engine.__name__, options.threads, inputs.reference, inputs.query,
                   Execution(outdir, tarball, options.diagonal_partition, progress=progress,
                             keep_results=True))


def print_counts(summary: Summary, stream=None) -> None:
    stream = stream or sys.stderr
    print(f"#seeds: {summary.seeds}", file=stream)
    print(f"#seed hits: {summary.hits}", file=stream)
    print(f"#raw HSPs: {summary.raw_hsps}", file=stream)
    print(f"#HSPs: {summary.hsps}", file=stream)




def say_removed(emitter: Emitter) -> None:
    """One line when publishing removed segments files an earlier run left in OUT."""
    if emitter.removed:
        say(f"output: removed {len(emitter.removed)} segments file(s) that an earlier run left "
            f"in {emitter.outdir} and this run did not write (first: {emitter.removed[0]})")
