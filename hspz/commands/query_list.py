"""`hspZ run --query-list`: many queries against one reference in one process.

    list -> reference (read, or an index) -> every job: read its query, freeze its own plan
    (all must share the reference bins) -> one schedule for the batch -> workers (each
    reference bin built or loaded once, bin-major) -> each job published as it completes
    -> queries.tsv, last

Every job is the standalone run of its query: OUT/000001/ holds the bytes `hspZ run -q` of that
query writes.  The parent keeps each job's plan, not its bases: the workers read a job's query
file when they reach it, so memory follows the largest job, not the batch.  `hspZ plan
--query-list` runs the same planning (`plan_batch`) and `hspZ merge` the same emitting.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hspz.core.durable import write_text
from hspz.core.errors import HspzError, UsageError
from hspz.core.progress import Progress
from hspz.core.scoring import resolve_matrix
from hspz.engine.contract import Backend
from hspz.formats import index as ix
from hspz.formats.planfile import PlanJob
from hspz.io.digests import HashedRecords
from hspz.io.readers import read_side
from hspz.planning import joblist
from hspz.planning.budget import devices_for
from hspz.planning.schedule import Devices, Schedule, make_schedule, partition_knob, schedule_lines
from hspz.run import job_entries, report
from hspz.run.execute import Execution, Job, Summary, execute, print_counts, timed
from hspz.run.freeze import Freeze, freeze
from hspz.run.report import say
from hspz.run.request import Request
from hspz.run.worker import QuerySpec


@dataclass
class Batch:
    """A planned batch: the engine and devices it was planned for, the reference (records, or
    the index's known records), every job's frozen plan and the schedule."""

    engine: Backend
    devices: Devices
    ref: list
    jobs: list[PlanJob]
    schedule: Schedule
    index: ix.Index | None = None
    verify: ix.Verification | None = None


def plan_batch(req: Request, select: Callable[[], Backend], summary: Summary) -> Batch:
    """Read the list and the reference (or open the index), plan every job, schedule the
    batch (its `schedule:` lines printed), write the per-job dumps."""
    o = req.options
    assert req.query_list is not None  # batch mode is --query-list
    listed, notes = joblist.read_query_list(req.query_list)
    say(notes)
    idx = verify = None
    ref: list  # the records, or an index's KnownRecords
    with timed(summary.phases, "input"):
        if req.index:
            idx, ref, verify = ix.open_checked(req.index, o, req.reference)
        else:
            assert req.reference is not None  # the CLI requires -r without --index
            ref = HashedRecords(read_side(req.reference, "reference"))
    engine = select()
    devices = devices_for(engine, o.gpus)
    with timed(summary.phases, "plan"):
        jobs = plan_jobs(req, listed, devices, ref)
        if idx is not None:
            ix.check_plan(idx, jobs[0].manifest.plan.ref_bins)
    write_job_dumps(req, jobs)
    m0 = jobs[0].manifest
    axis = joblist.BatchAxis(tuple(len(j.manifest.plan.query_bins) for j in jobs))
    ref_bp = [sum(m0.ref_lengths[k] for k in b) for b in m0.plan.ref_bins]
    sched = make_schedule(axis.plan(m0.plan.ref_bins), ref_bp, o.gpus, devices,
                          partition_knob())
    say(schedule_lines(sched))
    return Batch(engine, devices, ref, jobs, sched, idx, verify)


def plan_jobs(req: Request, listed: list[joblist.ListedQuery], devices: Devices,
              ref: list) -> list[PlanJob]:
    """Every listed query read and planned as a standalone run with these flags plans it; a
    job the memory preflight would replan is refused, and every job must share the first
    job's reference bins."""
    o = req.options
    matrix = resolve_matrix(o.xdrop, o.scoring, o.ambiguous)
    out = []
    for q in listed:
        name = joblist.job_name(q.number)
        try:
            records = HashedRecords(read_side(q.path, "query"))
            size, sha = ix.file_sha256(q.path)
            f = Freeze(o, devices, matrix, True)
            m = freeze(f, ref, records)
        except OSError as exc:
            raise UsageError(f"job {name} ({q.path}): cannot read it: {exc.strerror}") from None
        except HspzError as exc:
            raise type(exc)(f"job {name} ({q.path}): {exc}") from None
        if f.notes:
            raise UsageError(f"job {name} ({q.path}): the memory preflight would replan it "
                             f"({f.notes[0].removeprefix('note: ')}); a batch refuses rather "
                             f"than replans: give a smaller -B or --query-block-size")
        out.append(PlanJob(q.number, q.path, size, sha, m))
        del records
    joblist.check_same_reference_bins([j.manifest.plan.ref_bins for j in out],
                                      [j.path for j in out])
    return out


def spec_of(job: PlanJob) -> QuerySpec:
    """How a worker reads a batch job's query: its file, checked against its records hash."""
    return QuerySpec(job.number - 1, job.manifest.plan.query_bins, job.path,
                     job.manifest.qry_digest)


def suffixed(path: str, job: PlanJob) -> str:
    """A dump file of one job: `plan.tsv` -> `plan.tsv.000001`."""
    return f"{path}.{job.name}"


def write_job_dumps(req: Request, jobs: list[PlanJob]) -> None:
    for job in jobs:
        if req.dump_plan:
            report.write_plan(suffixed(req.dump_plan, job), job.manifest)
        if req.dump_manifest:
            write_text(suffixed(req.dump_manifest, job), job.manifest.to_text(), "--dump-manifest")


def batch_jobs(planned: list[PlanJob], out: Path, tarball: bool,
               raw: str | None = None) -> list[Job]:
    """Each planned job as an execution's Job: OUT/000001/ (or OUT/000001.tar.gz with -Z)."""
    return [Job(p.manifest, out if tarball else out / p.name,
                out / f"{p.name}.tar.gz" if tarball else None, spec_of(p), p.number,
                raw=suffixed(raw, p) if raw else None)
            for p in planned]


def queries_row(p: PlanJob, summary: Summary) -> dict:
    return dict(job=p.name, path=p.path, bytes=p.size, sha256=p.sha256,
                blocks=len(p.manifest.plan.query_bins), units=len(p.manifest.plan.units),
                hsps=summary.hsps, digest=summary.digest, completion="complete")


def entry_names(planned: list[PlanJob], tarball: bool) -> list[str]:
    """The job entries a batch publishes in OUT: 000001/ ..., or 000001.tar.gz ..."""
    return [f"{p.name}.tar.gz" if tarball else p.name for p in planned]


def finish_batch(out: Path, planned: list[PlanJob], jobs: list[Job], tarball: bool) -> None:
    """Once every job is published: the older batch's other job entries (and the other form)
    removed, then queries.tsv written (atomically), and each job's `digest:` line."""
    job_entries.sweep_stale(out, entry_names(planned, tarball))
    job_entries.complete_batch(out, joblist.queries_tsv([queries_row(p, j.summary)
                                           for p, j in zip(planned, jobs, strict=True)]))
    for job in jobs:
        print(f"digest: {joblist.job_name(job.number)} {job.summary.digest}")
    say(f"batch: {len(jobs)} job(s) complete -> {out / joblist.QUERIES_TSV}")


def job_line(job: Job) -> str:
    assert job.spec is not None  # a batch job reads its own query
    return (f"progress: job {joblist.job_name(job.number)} complete: {job.summary.hsps} HSPs, "
            f"digest {job.summary.digest} ({job.spec.path})")


def batch_command(req: Request, select: Callable[[], Backend]) -> int:
    """`hspZ run --query-list FILE`."""
    t0 = time.perf_counter()
    summary = Summary()
    b = plan_batch(req, select, summary)
    try:
        return _execute(req, b, summary, t0)
    finally:
        if b.verify is not None:
            b.verify.close()


def _execute(req: Request, b: Batch, summary: Summary, t0: float) -> int:
    from hspz.commands.run import index_loaded_line, index_using_line

    o = req.options
    out = Path(req.output)
    if b.index is not None:
        say(index_using_line(b.index, req.reference))
    jobs = batch_jobs(b.jobs, out, bool(req.tarball), req.dump_raw)
    job_entries.retire(out, entry_names(b.jobs, bool(req.tarball)))
    if b.index is None and not req.tarball:  # job folders exist from the start (docs/workers.md)
        for job in jobs:
            Path(job.outdir).mkdir(parents=True, exist_ok=True)
    progress = Progress(sum(len(p.manifest.plan.units) for p in b.jobs), len(b.jobs))
    how = Execution(o.diagonal_partition, bool(req.dump_raw), req.hit_stats, progress,
                    index=req.index, verify=b.verify,
                    on_job=lambda job: progress.job_done(job_line(job)))
    summary.batch = True
    execute(jobs, b.schedule, b.engine, o.threads, b.ref, None, how, t0, summary)
    if b.index is not None:
        say(index_loaded_line(b.index, summary, req.reference))
    print_counts(summary)
    wall = time.perf_counter() - t0
    if req.time:
        report.print_time(summary, wall)
        report.print_batch(summary, b.jobs, wall)
    if req.hit_stats:
        assert summary.hit_stats is not None  # kept when asked for
        report.print_hit_stats(summary.hit_stats)
    finish_batch(out, b.jobs, jobs, bool(req.tarball))
    sys.stdout.flush()
    return 0


def tarball_note(req: Request) -> str | None:
    """-Z PATH in batch mode: the path is ignored (one archive per job), said once."""
    if req.tarball and req.tarball != os.path.join(req.output, "segments.tar.gz"):
        return (f"note: --tarball {req.tarball} is ignored with --query-list: each job gets "
                f"OUT/000001.tar.gz, ...")
    return None
