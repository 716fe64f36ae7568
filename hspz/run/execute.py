"""Executing a frozen job: the schedule's workers run their units (`hspz.run.worker`), the emitter
replays the results in ordinal order into OUT, and the summary gathers counts, phases and the
unit ledger for the report.  It is the driver's execute stage (`hspz.run.driver.drive`), and
`hspZ merge` replays results files through the same `Emitters` (a query list's jobs on threads,
`hspz.run.replay`)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from hspz.core import durable
from hspz.core.errors import RunError, sigterm_held
from hspz.core.progress import Progress
from hspz.engine.contract import UnitResult
from hspz.formats.manifest import Manifest
from hspz.io.records import Record
from hspz.planning import bins, estimate
from hspz.planning import schedule as scheduling
from hspz.planning.budget import per_worker_threads
from hspz.planning.joblist import JobAxis
from hspz.run.emit import Emitter, Ready, table_lookup
from hspz.run.freeze import context_of
from hspz.run.outdir import check_moves, discard_stage, new_stage, publish
from hspz.run.pool import Pool, run_workers
from hspz.run.report import say, write_raw
from hspz.run.summary import Summary
from hspz.run.worker import QuerySpec, WorkerJob, WorkerReport

if TYPE_CHECKING:
    from hspz.engine.contract import Backend
    from hspz.formats.index import Verification


@contextmanager
def timed(phases: dict, name: str) -> Iterator[None]:
    """Add the wall-clock seconds of the block to `phases[name]`."""
    t = time.perf_counter()
    try:
        yield
    finally:
        phases[name] = phases.get(name, 0.0) + time.perf_counter() - t


@dataclass
class Execution:
    """How to run frozen jobs: what to keep and what to report."""

    diagonal: bool = False
    keep_raw: bool = False  # the engine keeps pre-dedup HSPs (--dump-raw)
    hit_stats: bool = False
    progress: Progress | None = None
    keep_results: bool = False  # Summary.results holds every UnitResult (--dump-raw, library)
    index: str | None = None  # reference bins are loaded from this index folder
    verify: Verification | None = None  # of the reference, waited for before output
    on_job: Callable[[Job], None] | None = None  # a query-list job has been published


@dataclass
class Job:
    """One job of an execution: its frozen plan, where its output goes and, in a query-list run, the
    query file its workers read (`spec`).  `summary` fills as it runs."""

    manifest: Manifest
    outdir: str | Path
    tarball: str | Path | None = None
    spec: QuerySpec | None = None
    number: int = 0  # a query-list job's number (1, 2, ...); 0 for a single query
    raw: str | Path | None = None  # --dump-raw: published with the job's segments files
    summary: Summary = field(default_factory=lambda: Summary())


def worker_jobs(
    jobs: list[Job],
    sched: scheduling.Schedule,
    engine: Backend,
    threads: int,
    t0: float,
    how: Execution,
) -> list[WorkerJob]:
    ctx = context_of(jobs[0].manifest, how.keep_raw)
    per = per_worker_threads(threads, sched.workers)
    if jobs[0].spec is None:  # a single query: its own plan, its records handed over
        plan, specs = jobs[0].manifest.plan, None
    else:
        specs = []
        for job in jobs:
            assert job.spec is not None  # a query-list run: every job names its query file
            specs.append(job.spec)
        plan = JobAxis(tuple(len(s.query_bins) for s in specs)).plan(jobs[0].manifest.plan.ref_bins)
    return [
        WorkerJob(
            k,
            sched.devices[k],
            sched.visits[k],
            ctx,
            plan,
            engine,
            per,
            t0,
            how.hit_stats,
            how.index,
            specs,
            how.progress is not None,
        )
        for k in range(sched.workers)
    ]


def ledger_row(m: Manifest, r: UnitResult, label: str, job: int = 0) -> dict:
    rbp = bins.bin_bp(m.plan.ref_bins, m.ref_lengths)[r.ref_bin]
    qbp = bins.bin_bp(m.plan.query_bins, m.qry_lengths)[r.query_bin]
    return dict(
        job=job,
        ordinal=r.ordinal,
        worker=r.worker,
        device=label,
        ref_bin=r.ref_bin,
        # the ledger's column keeps its documented name (docs/report-lines.md), though
        # it holds the engine's time on either backend
        query_bin=r.query_bin,
        ref_bp=rbp,
        query_bp=qbp,
        gpu_ms=r.engine_ms,
        host_start_ms=r.host_start_ms,
        host_end_ms=r.host_end_ms,
        seeds=r.seeds,
        hits=r.hits,
        raw_hsps=r.raw_hsps,
        hsps=r.hsps,
    )


def _raw_writer(job: Job) -> Callable[[Path], None]:
    """`--dump-raw`'s writer for one job: its pre-dedup HSPs, once the job has run."""
    return lambda tmp: write_raw(tmp, job.summary.results)


class Emitters:
    """One emitter per job, fed in any order; a query-list job is published as soon as its last
    unit is in (its folder fills as its units finish), a single query once the workers are
    done.  Nothing is staged before the reference has been verified against the index.

    With a `batch` root (OUT: `hspZ merge` of a query list, whose results are all there), every
    job stages into one stage folder in OUT and a finished job waits (`queued`) for `flush`,
    which publishes them all under one journal: each folder is synced once, not once a job.  A
    failure or an interrupt publishes the jobs finished before it (`abort`), so OUT ends as the
    job-by-job publish leaves it.  `known`: {job: digest} `hspZ work` made of jobs it ran whole
    (their lines are then not sorted and hashed again)."""

    def __init__(
        self,
        jobs: list[Job],
        sched: scheduling.Schedule,
        how: Execution,
        summary: Summary,
        batch: Path | None = None,
        known: dict[int, str] | None = None,
    ):
        self.jobs, self.how, self.summary = jobs, how, summary
        self.batch = Path(os.path.abspath(batch)) if batch is not None else None
        self.shared = new_stage(self.batch) if self.batch is not None else None
        self.queued: list[tuple[int, Ready]] = []
        self.query_list = jobs[0].spec is not None
        labels = dict(enumerate(sched.labels))
        self.left = [len(job.manifest.plan.units) for job in jobs]

        # `hspz.run.replay` stages jobs on threads: each job's rows then wait in `keyed[j]`, with
        # the index of the add that emitted them (`at[j]`), to be put in today's order after
        self.keyed: list[list[tuple[int, dict]]] | None = None
        self.at = [0] * len(jobs)

        def emitted(j: int, job: Job) -> Callable[[UnitResult], None]:
            def done(result: UnitResult) -> None:
                row = ledger_row(job.manifest, result, labels.get(result.worker, ""), job.number)
                if self.keyed is None:
                    summary.ledger.append(row)
                else:
                    self.keyed[j].append((self.at[j], row))
                if how.keep_results or how.keep_raw:
                    job.summary.results.append(result)
                if how.progress is not None:
                    how.progress.unit_done((result.job, result.ordinal), result.hits)

            return done

        self.emitters = [
            Emitter(
                job.manifest.plan.units,
                table_lookup(job.manifest),
                job.outdir,
                job.tarball,
                how.diagonal,
                emitted(j, job),
                self.shared,
                f"{j}." if self.shared is not None else "",
            )
            for j, job in enumerate(jobs)
        ]
        for j, digest in (known or {}).items():  # the jobs `hspZ work` digested whole
            self.emitters[j].known = digest
        if self.shared is not None:  # made here, before any job stages on a thread of its own
            durable.ensure_marked(self.shared)
        for job, emitter in zip(jobs, self.emitters, strict=True):
            if job.raw:
                emitter.also(job.raw, _raw_writer(job), "--dump-raw")
        self.open = set(range(len(jobs)))

    def add(self, result: UnitResult) -> None:
        j = result.job
        self.stage(result)
        self.left[j] -= 1
        if self.query_list and not self.left[j]:
            self.finish(j)

    def stage(self, result: UnitResult, at: int = 0) -> None:
        """One result into its job's emitter, nothing published; `at` keys its ledger rows while
        `keyed`.  Touches only that job's state, so jobs may stage on threads of their own."""
        j = result.job
        emitter = self.emitters[j]
        if self.how.verify is not None and not emitter.pending and not emitter.done:
            self.how.verify.wait("index.verify wait (emitter)")  # nothing is staged before
        self.at[j] = at
        emitter.add(result)

    def finish(self, j: int) -> None:
        """Publish job j; its summary gets the counts and the digest."""
        if self.how.verify is not None:
            self.how.verify.wait("index.verify wait")
        emitter = self.emitters[j]
        if self.batch is not None:
            ready = emitter.ready()
            check_moves(emitter.root, ready.moves)  # where (and as) the job-by-job publish refuses
            self.queued.append((j, ready))
            self.open.discard(j)
            return
        self.jobs[j].summary.digest = emitter.finish()
        self.open.discard(j)
        self.published(j)

    def published(self, j: int) -> None:
        emitter, job = self.emitters[j], self.jobs[j]
        say_removed(emitter)
        for key, value in emitter.counts.items():
            setattr(job.summary, key, value)
        if self.how.on_job is not None:
            self.how.on_job(job)

    def flush(self) -> None:
        """Publish the queued jobs under one journal in the batch root, in the order they
        finished; then each job's summary, as `finish` gives it."""
        queued, self.queued = self.queued, []
        if not queued or self.batch is None or self.shared is None:
            return
        moves = [m for _, ready in queued for m in ready.moves]
        remove = [r for _, ready in queued for r in ready.remove]
        try:
            with sigterm_held():  # all of the renames, or none
                publish(self.batch, self.shared, moves, remove)
        except OSError as exc:
            name = f" ({Path(exc.filename).name})" if exc.filename else ""
            raise RunError(
                f"cannot write the output in {self.batch}: {exc.strerror or exc}{name}"
            ) from exc
        for j, ready in queued:
            self.jobs[j].summary.digest = self.emitters[j].published(ready)
            self.published(j)
        self._remove_shared()  # the roll removed it: a no-op unless it left it

    def abort(self) -> None:
        """The jobs finished before a failure published (a batch), the others' stages removed."""
        try:
            self.flush()
        finally:
            for j in sorted(self.open):
                self.emitters[j].abort()
            self._remove_shared()

    def _remove_shared(self) -> None:
        """The batch's stage removed; a publish stopped after its journal was written is
        completed instead (the journal promised it), or left for the next command."""
        if self.shared is not None:
            discard_stage(self.shared.parent, self.shared)


def execute(
    jobs: list[Job],
    sched: scheduling.Schedule,
    engine: Backend,
    threads: int,
    ref: list[Record],
    qry: list[Record] | None,
    how: Execution,
    t0: float | None = None,
    summary: Summary | None = None,
    pool: Pool | None = None,
) -> Summary:
    """Run every worker of the schedule and emit each job's results in ordinal order; the
    summary holds the totals (and, for one job, its digest)."""
    summary = summary or Summary()
    summary.manifest, summary.schedule = jobs[0].manifest, sched
    t0 = time.perf_counter() if t0 is None else t0
    summary.hit_stats = estimate.HitHistogram() if how.hit_stats else None
    emitters = Emitters(jobs, sched, how, summary)

    def sink(result: UnitResult, extras: estimate.HitHistogram | None) -> None:
        if extras is not None and summary.hit_stats is not None:
            summary.hit_stats.merge(extras)
        emitters.add(result)

    workers = worker_jobs(jobs, sched, engine, threads, t0, how)
    advance = None if how.progress is None else how.progress.advance
    if how.verify is not None:  # other records than the index's: refused before any engine
        how.verify.wait_shape("index.verify wait (names, lengths)")
    try:
        with timed(summary.phases, "workers"):
            bases = [] if how.index else ref  # workers load an index's bins themselves
            summary.reports = run_workers(workers, bases, qry or [], sink, pool, advance)
        with timed(summary.phases, "publish"):
            for j in sorted(emitters.open):
                emitters.finish(j)
    except BaseException:
        emitters.abort()
        raise
    finally:
        if how.progress is not None:
            how.progress.close()
    if how.verify is not None:
        summary.phases.update(how.verify.waited)
        summary.phases["input.reference (background)"] = how.verify.seconds
    check_lifecycle(summary.reports, sched)
    summary.jobs = jobs
    for key in ("seeds", "hits", "raw_hsps", "hsps"):
        setattr(summary, key, sum(getattr(job.summary, key) for job in jobs))
    summary.results = [r for job in jobs for r in job.summary.results]
    summary.digest = jobs[0].summary.digest if len(jobs) == 1 else ""
    return summary


def check_lifecycle(reports: list[WorkerReport], sched: scheduling.Schedule) -> None:
    """builds + loads = uploads = Σ visits, and every planned unit ran once."""
    made = sum(r.builds + r.loads for r in reports)
    uploads = sum(r.uploads for r in reports)
    units = sum(r.units for r in reports)
    planned = sum(v.units for vs in sched.visits for v in vs)
    if not made == uploads == sched.total_visits or units != planned:
        raise RunError(
            f"lifecycle mismatch: {made} builds and loads, {uploads} uploads, "
            f"{sched.total_visits} visits, {units} of {planned} units"
        )


def print_counts(summary: Summary, stream: TextIO | None = None) -> None:
    stream = stream or sys.stderr
    print(f"#seeds: {summary.seeds}", file=stream)
    print(f"#seed hits: {summary.hits}", file=stream)
    print(f"#raw HSPs: {summary.raw_hsps}", file=stream)
    print(f"#HSPs: {summary.hsps}", file=stream)


def say_removed(emitter: Emitter) -> None:
    """One line when publishing removed segments files an earlier run left in OUT."""
    if emitter.removed:
        say(
            f"output: removed {len(emitter.removed)} segments file(s) that an earlier run left "
            f"in {emitter.outdir} and this run did not write (first: {emitter.removed[0]})"
        )
