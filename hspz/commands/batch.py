"""`hspZ run --query-list`: many queries against one reference in one process.

    list -> reference (read, or an index) -> every job: read its query, freeze its own plan
    (all must share the reference bins) -> one schedule for the batch -> workers (each
    reference bin built or loaded once, bin-major) -> each job published as it completes
    -> queries.tsv, last

Every job is the standalone run of its query: OUT/000001/ holds the bytes `hspZ run -q` of that
query writes.  The parent keeps each job's plan, not its bases: the workers read a job's query
file when they reach it, so memory follows the largest job, not the batch.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from hspz import batch as bt
from hspz import index as ix
from hspz import report
from hspz.budget import devices_for
from hspz.commands import Request
from hspz.errors import HspzError, UsageError
from hspz.execute import Execution, Job, Summary, execute, print_counts, timed
from hspz.freeze import Freeze, freeze
from hspz.inputs import read_side
from hspz.manifest import Manifest, write_text
from hspz.progress import Progress
from hspz.report import say
from hspz.schedule import make_schedule, partition_knob, schedule_lines
from hspz.scoring import resolve_matrix
from hspz.sequence import HashedRecords, records_digest
from hspz.workers import QuerySpec


@dataclass
class PlannedJob:
    """One job of a batch, planned: its frozen plan, the spec its workers read its query by,
    and what queries.tsv says of its file."""

    number: int
    path: str
    manifest: Manifest
    spec: QuerySpec
    size: int
    sha256: str

    @property
    def name(self) -> str:
        return bt.job_name(self.number)


def batch_command(req: Request, select) -> int:
    """`hspZ run --query-list FILE`."""
    t0 = time.perf_counter()
    summary = Summary()
    o = req.options
    listed, notes = bt.read_query_list(req.query_list)
    say(notes)
    idx = verify = None
    with timed(summary.phases, "input"):
        if req.index:
            idx = ix.open_index(req.index)
            ix.check_options(idx, o)
            verify = ix.Verification(req.reference, idx) if req.reference else None
            ref = ix.known_records(idx)
        else:
            ref = HashedRecords(read_side(req.reference, "reference"))
    try:
        engine = select()
        devices = devices_for(engine, o.gpus)
        with timed(summary.phases, "plan"):
            jobs = plan_jobs(req, listed, devices, ref)
            if idx is not None:
                ix.check_plan(idx, jobs[0].manifest.plan.ref_bins)
        write_job_dumps(req, jobs)
        return _execute(req, engine, devices, ref, jobs, idx, verify, summary, t0)
    finally:
        if verify is not None:
            verify.close()


def plan_jobs(req: Request, listed: list[bt.ListedQuery], devices, ref) -> list[PlannedJob]:
    """Every listed query read and planned as a standalone run with these flags plans it; a
    job the memory preflight would replan is refused, and every job must share the first
    job's reference bins."""
    o = req.options
    matrix = resolve_matrix(o.xdrop, o.scoring, o.ambiguous)
    out = []
    for q in listed:
        name = bt.job_name(q.number)
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
        spec = QuerySpec(q.number - 1, m.plan.query_bins, q.path, records_digest(records))
        out.append(PlannedJob(q.number, q.path, m, spec, size, sha))
        del records
    bt.check_same_reference_bins([j.manifest.plan.ref_bins for j in out], [j.path for j in out])
    return out


def suffixed(path: str, job: PlannedJob) -> str:
    """A dump file of one job: `plan.tsv` -> `plan.tsv.000001`."""
    return f"{path}.{job.name}"


def write_job_dumps(req: Request, jobs: list[PlannedJob]) -> None:
    for job in jobs:
        if req.dump_plan:
            report.write_plan(suffixed(req.dump_plan, job), job.manifest)
        if req.dump_manifest:
            write_text(suffixed(req.dump_manifest, job), job.manifest.to_text())


def _execute(req: Request, engine, devices, ref, planned: list[PlannedJob], idx, verify,
             summary: Summary, t0: float) -> int:
    o = req.options
    out = Path(req.output)
    axis = bt.BatchAxis(tuple(len(j.manifest.plan.query_bins) for j in planned))
    m0 = planned[0].manifest
    ref_bp = [sum(m0.ref_lengths[k] for k in b) for b in m0.plan.ref_bins]
    sched = make_schedule(axis.plan(m0.plan.ref_bins), ref_bp, o.gpus, devices,
                          partition_knob())
    say(schedule_lines(sched))
    if idx is not None:
        from hspz.commands.run import index_using_line

        say(index_using_line(idx, req.reference))
    jobs = [Job(p.manifest, out if req.tarball else out / p.name,
                out / f"{p.name}.tar.gz" if req.tarball else None, p.spec, p.number,
                raw=suffixed(req.dump_raw, p) if req.dump_raw else None)
            for p in planned]
    if idx is None and not req.tarball:  # job folders exist from the start (see the spec)
        for job in jobs:
            Path(job.outdir).mkdir(parents=True, exist_ok=True)
    progress = Progress(sum(len(p.manifest.plan.units) for p in planned), len(planned))
    rows: dict[int, dict] = {}

    def published(job: Job) -> None:
        p = planned[job.number - 1]
        rows[job.number] = dict(job=p.name, path=p.path, bytes=p.size, sha256=p.sha256,
                                blocks=len(p.manifest.plan.query_bins),
                                units=len(p.manifest.plan.units), hsps=job.summary.hsps,
                                digest=job.summary.digest, completion="complete")
        progress.job_done(f"progress: job {p.name} complete: {job.summary.hsps} HSPs, digest "
                          f"{job.summary.digest} ({p.path})")

    how = Execution(o.diagonal_partition, bool(req.dump_raw), req.hit_stats, progress,
                    index=req.index, verify=verify, on_job=published)
    summary.batch = True
    execute(jobs, sched, engine.__name__, o.threads, ref, None, how, t0, summary)
    write_text(out / bt.QUERIES_TSV, bt.queries_tsv([rows[n] for n in sorted(rows)]))
    if idx is not None:
        from hspz.commands.run import index_loaded_line

        say(index_loaded_line(idx, summary, req.reference))
    print_counts(summary)
    wall = time.perf_counter() - t0
    if req.time:
        report.print_time(summary, wall)
        report.print_batch(summary, planned, wall)
    if req.hit_stats:
        report.print_hit_stats(summary.hit_stats)
    for job in jobs:
        print(f"digest: {bt.job_name(job.number)} {job.summary.digest}")
    say(f"batch: {len(jobs)} job(s) complete -> {out / bt.QUERIES_TSV}")
    sys.stdout.flush()
    return 0


def tarball_note(req: Request) -> str | None:
    """-Z PATH in batch mode: the path is ignored (one archive per job), said once."""
    if req.tarball and req.tarball != os.path.join(req.output, "segments.tar.gz"):
        return (f"note: --tarball {req.tarball} is ignored with --query-list: each job gets "
                f"OUT/000001.tar.gz, ...")
    return None
