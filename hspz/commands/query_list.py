"""`hspZ run --query-list`: many queries against one reference in one process.

    list -> reference (read, or an index) -> every job: read its query, freeze its own plan
    (all must share the reference bins) -> one schedule for the query-list run -> workers (each
    reference bin built or loaded once, bin-major) -> each job published as it completes
    -> queries.tsv, last

Every job is the standalone run of its query: OUT/000001/ holds the bytes `hspZ run -q` of that
query writes.  The parent keeps each job's plan, not its bases: the workers read a job's query
file when they reach it, so memory follows the largest job, not the query-list run.  `hspZ plan
--query-list` runs the same first stages (`plan_query_list`) and `hspZ merge` the same emitting;
`run --query-list` is N jobs through the one driver (`hspz.run.driver.drive`, with `QueryList`).
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable, Generator, Iterator
from contextlib import closing
from pathlib import Path

from hspz.commands.index import bounded_map
from hspz.core.durable import write_text
from hspz.core.errors import HspzError, UsageError
from hspz.core.progress import Progress
from hspz.core.scoring import resolve_matrix
from hspz.engine.contract import Backend
from hspz.formats import index as ix
from hspz.formats.planfile import PlanJob
from hspz.io.digests import HashedRecords, KnownRecords
from hspz.io.readers import read_bytes, read_side, side_of
from hspz.planning import joblist
from hspz.planning.budget import devices_for
from hspz.planning.schedule import Devices, Schedule, run_schedule, schedule_lines
from hspz.run import job_entries, report
from hspz.run.driver import Work, drive
from hspz.run.execute import Execution, Job, Summary
from hspz.run.freeze import Freeze, freeze
from hspz.run.report import say
from hspz.run.request import Request
from hspz.run.worker import QuerySpec


class QueryList(Work):
    """A query list's stages: the list and the reference read here (or the index opened),
    every job frozen as its own plan (its dumps written as it is planned, as `hspZ plan
    --query-list` writes them), one schedule for the query-list run, each job published into
    OUT/000001/ ... as it completes, and queries.tsv last.  `jobs` are the planned jobs,
    `sched` their schedule, `devices` what they were planned for."""

    qry = None  # the workers read each job's query
    jobs: list[PlanJob]
    sched: Schedule
    devices: Devices

    def read(self, req: Request) -> None:
        assert req.query_list is not None  # query-list mode is --query-list
        self.listed, notes = joblist.read_query_list(req.query_list)
        say(notes)
        if req.index:
            self.index, self.ref, self.verify = ix.open_checked(
                req.index, req.options, req.reference
            )
        else:
            assert req.reference is not None  # the CLI requires -r without --index
            self.ref = HashedRecords(read_side(req.reference, "reference"))

    def freeze(self, req: Request, devices: Devices) -> list[Job]:
        self.devices = devices
        self.jobs = plan_jobs(req, self.listed, devices, self.ref)
        if self.index is not None:
            ix.check_plan(self.index, self.jobs[0].manifest.plan.ref_bins)
        write_job_dumps(req, self.jobs)
        return query_list_jobs(self.jobs, Path(req.output), bool(req.tarball), req.dump_raw)

    def schedule(
        self, req: Request, jobs: list[Job], devices: Devices, summary: Summary
    ) -> Schedule:
        m0 = self.jobs[0].manifest
        axis = joblist.JobAxis(tuple(len(j.manifest.plan.query_bins) for j in self.jobs))
        ref_bp = [sum(m0.ref_lengths[k] for k in b) for b in m0.plan.ref_bins]
        self.sched = run_schedule(axis.plan(m0.plan.ref_bins), ref_bp, req.options.gpus, devices)
        say(schedule_lines(self.sched))
        return self.sched

    def ready(self, req: Request, jobs: list[Job]) -> None:
        """The older query-list run's entries of these jobs retired; the job folders made (they
        exist from the start: docs/workers.md)."""
        job_entries.retire(Path(req.output), entry_names(self.jobs, bool(req.tarball)))
        if self.index is None and not req.tarball:
            for job in jobs:
                Path(job.outdir).mkdir(parents=True, exist_ok=True)

    def execution(self, req: Request, jobs: list[Job], summary: Summary) -> Execution:
        progress = Progress(sum(len(p.manifest.plan.units) for p in self.jobs), len(self.jobs))
        summary.query_list = True
        return Execution(
            req.options.diagonal_partition,
            bool(req.dump_raw),
            req.hit_stats,
            progress,
            index=req.index,
            verify=self.verify,
            on_job=lambda job: progress.job_done(job_line(job)),
        )

    def time_lines(self, summary: Summary, wall: float) -> None:
        report.print_query_list(summary, self.jobs, wall)

    def publish(self, req: Request, summary: Summary) -> None:
        finish_query_list(Path(req.output), self.jobs, summary.jobs, bool(req.tarball))
        sys.stdout.flush()


def plan_query_list(req: Request, select: Callable[[], Backend]) -> QueryList:
    """`hspZ plan --query-list`'s first stages, as the driver runs them: read the list and the
    reference (or open the index), plan every job (its dumps written), schedule the query-list run
    (its `schedule:` lines printed)."""
    work = QueryList()
    try:
        work.read(req)
        devices = devices_for(select(), req.options.gpus)
        jobs = work.freeze(req, devices)
        work.schedule(req, jobs, devices, Summary())
    except BaseException:
        if work.verify is not None:
            work.verify.close()
        raise
    return work


def plan_jobs(
    req: Request, listed: list[joblist.ListedQuery], devices: Devices, ref: list
) -> list[PlanJob]:
    """Every listed query read and planned as a standalone run with these flags plans it; a
    job the memory preflight would replan is refused, and every job must share the first
    job's reference bins."""
    o = req.options
    matrix = resolve_matrix(o.xdrop, o.scoring, o.ambiguous)
    with closing(query_reads(listed, devices.backend == "cpu")) as reads:
        out = [plan_job(Freeze(o, devices, matrix, True), q, ref, reads) for q in listed]
    joblist.check_same_reference_bins(
        [j.manifest.plan.ref_bins for j in out], [j.path for j in out]
    )
    return out


def plan_job(
    f: Freeze,
    q: joblist.ListedQuery,
    ref: list,
    reads: Iterator[tuple[HashedRecords, int, str]],
) -> PlanJob:
    """One listed query, its read taken from `reads`, planned; every error names the job."""
    name = joblist.job_name(q.number)
    try:
        records, size, sha = next(reads)
        m = freeze(f, ref, records)
    except OSError as exc:
        raise UsageError(f"job {name} ({q.path}): cannot read it: {exc.strerror}") from None
    except HspzError as exc:
        raise type(exc)(f"job {name} ({q.path}): {exc}") from None
    if f.notes:
        raise UsageError(
            f"job {name} ({q.path}): the memory preflight would replan it "
            f"({f.notes[0].removeprefix('note: ')}); a batch refuses rather "
            f"than replans: give a smaller -B or --query-block-size"
        )
    return PlanJob(q.number, q.path, size, sha, m)


PLAN_READERS = min(4, os.cpu_count() or 1)  # GPU plans: queries read and hashed at once


def query_reads(
    listed: list[joblist.ListedQuery], bases: bool
) -> Generator[tuple[HashedRecords, int, str]]:
    """`planned_query` of every listed query, in order (a read's error raised when its job is
    reached): one at a time with `bases` (the CPU estimate counts the queries' seedable bases),
    else PLAN_READERS at once on threads."""
    if bases:
        for q in listed:
            yield planned_query(q.path, True)
    else:
        yield from bounded_map(lambda q: planned_query(q.path, False), listed, PLAN_READERS)


def planned_query(path: str, bases: bool) -> tuple[HashedRecords, int, str]:
    """A job's query as its plan needs it: its records with their records hash, and the file's
    (size, sha256), all of the same bytes, read once (a file edited between two reads was
    planned under the records of one version and the sha256 of the other).  A FIFO or a device
    is refused before anything is read: the work jobs read each query again, and a FIFO nobody
    writes to held the plan for ever.  Without `bases` (a GPU plan needs only names, lengths
    and the hash: its budget is the device's) the bases are dropped once hashed, so the
    queries a GPU plan reads ahead on threads (decoding and hashing release the GIL) hold
    none."""
    data = read_bytes(path, regular=True)
    records = HashedRecords(side_of(data, path, "query"))
    size, sha = len(data), hashlib.sha256(data).hexdigest()
    if not bases:
        records = KnownRecords([r.name for r in records], [len(r) for r in records], records.digest)
    return records, size, sha


def spec_of(job: PlanJob) -> QuerySpec:
    """How a worker reads a query-list job's query: its file, checked against its records hash."""
    return QuerySpec(
        job.number - 1, job.manifest.plan.query_bins, job.path, job.manifest.qry_digest
    )


def suffixed(path: str, job: PlanJob) -> str:
    """A dump file of one job: `plan.tsv` -> `plan.tsv.000001`."""
    return f"{path}.{job.name}"


def write_job_dumps(req: Request, jobs: list[PlanJob]) -> None:
    for job in jobs:
        if req.dump_plan:
            report.write_plan(suffixed(req.dump_plan, job), job.manifest)
        if req.dump_manifest:
            write_text(suffixed(req.dump_manifest, job), job.manifest.to_text(), "--dump-manifest")


def query_list_jobs(
    planned: list[PlanJob], out: Path, tarball: bool, raw: str | None = None
) -> list[Job]:
    """Each planned job as an execution's Job: OUT/000001/ (or OUT/000001.tar.gz with -Z)."""
    return [
        Job(
            p.manifest,
            out if tarball else out / p.name,
            out / f"{p.name}.tar.gz" if tarball else None,
            spec_of(p),
            p.number,
            raw=suffixed(raw, p) if raw else None,
        )
        for p in planned
    ]


def queries_row(p: PlanJob, summary: Summary) -> dict:
    return dict(
        job=p.name,
        path=p.path,
        bytes=p.size,
        sha256=p.sha256,
        blocks=len(p.manifest.plan.query_bins),
        units=len(p.manifest.plan.units),
        hsps=summary.hsps,
        digest=summary.digest,
        completion="complete",
    )


def entry_names(planned: list[PlanJob], tarball: bool) -> list[str]:
    """The job entries a query-list run publishes in OUT: 000001/ ..., or 000001.tar.gz ..."""
    return [f"{p.name}.tar.gz" if tarball else p.name for p in planned]


def finish_query_list(out: Path, planned: list[PlanJob], jobs: list[Job], tarball: bool) -> None:
    """Once every job is published: the older query-list run's other job entries (and the other
    form) removed, then queries.tsv written (atomically), and each job's `digest:` line."""
    job_entries.sweep_stale(out, entry_names(planned, tarball))
    job_entries.complete_query_list(
        out,
        joblist.queries_tsv(
            [queries_row(p, j.summary) for p, j in zip(planned, jobs, strict=True)]
        ),
    )
    for job in jobs:
        print(f"digest: {joblist.job_name(job.number)} {job.summary.digest}")
    say(f"batch: {len(jobs)} job(s) complete -> {out / joblist.QUERIES_TSV}")


def job_line(job: Job) -> str:
    assert job.spec is not None  # a query-list job reads its own query
    return (
        f"progress: job {joblist.job_name(job.number)} complete: {job.summary.hsps} HSPs, "
        f"digest {job.summary.digest} ({job.spec.path})"
    )


def query_list_command(req: Request, select: Callable[[], Backend]) -> int:
    """`hspZ run --query-list FILE`: N jobs through the driver (`run.driver.drive`)."""
    drive(req, QueryList(), select)
    return 0


def tarball_note(req: Request) -> str | None:
    """-Z PATH in query-list mode: the path is ignored (one archive per job), said once."""
    if req.tarball and req.tarball != os.path.join(req.output, "segments.tar.gz"):
        return (
            f"note: --tarball {req.tarball} is ignored with --query-list: each job gets "
            f"OUT/000001.tar.gz, ..."
        )
    return None
