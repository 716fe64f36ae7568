"""The one driver: `drive` runs every `hspZ run` (one query, or a query list's N jobs) and every
in-library run (`compare`, `benchmark`), and its body is the stage list:

    read -> engine -> freeze -> schedule -> workers -> execute (emit, publish each job) -> report
    -> publish (the digest line; a query list's queries.tsv)

What differs between the kinds of run is a `Work` object: `commands.run.OneQuery`,
`commands.query_list.QueryList`, or `Given` here (records already read, nothing printed).

One FASTA record, from `hspZ run -r ref.fa -q qry.fa -o OUT` to a line of OUT's segments file:

1. `cli.main` parses the flags, `cli.cmd_run` builds a `run.request.Request`, and
   `commands.out_lock.run_in_out` takes OUT's lock before `commands.run.run_command` calls
   `drive(req, OneQuery(), select)`.
2. read: `io.readers.read_both` detects the format and `io.fasta.read_fasta_bytes` parses the
   record into an `io.records.Record` (its name and its bases).
3. engine: `select()` (`engine.backends`) picks the CPU or the GPU backend, and
   `planning.budget.devices_for` counts its devices.
4. freeze: `run.freeze.prepare` places the record in a query bin (`planning.bins`, under the
   memory preflight of `planning.memory` and `planning.layout`) and freezes the options, the bins
   and the units (reference bin x query bin) into a `formats.manifest.Manifest`.
5. schedule: `planning.schedule.run_schedule` hands the units to the workers, reference bin by
   reference bin (the `schedule:` lines).
6. workers: `run.pool` starts the worker processes (one worker runs in this process); each runs
   `run.worker.run_worker`, which prepares the record's bin (`engine.contract.prepare_query`:
   `io.packing.pack_bin` packs the bases, their offsets and the minus strand) and runs the
   engine (`engine.cpu` or `engine.gpu`) unit by unit through the algorithm's stages:
   `stages.seed`, `stages.xdrop`, `stages.hsp`.  Each unit's HSPs come back as an
   `engine.contract.UnitResult`.
7. execute: `run.execute.execute` feeds every result to its job's `run.emit.Emitter`, which
   replays them in ordinal order, names the record through `run.emit.table_lookup` and formats
   the segments lines (`stages.segments.format_lines`; -D splits them as `stages.partition`
   says) into a staged file (`core.durable`), their digest kept as they go (`run.digest`); once
   the job's last unit is in, `Emitter.finish` publishes the staged files into OUT
   (`run.outdir.publish`).
8. report: the `#seeds:` ... counts on stderr (and --time, --hit-stats); publish: the `digest:`
   line on stdout.

A query list is the same stages with N jobs: each job's query frozen as its own plan (sharing the
reference bins), one schedule for all of them, and each job published as it completes.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from hspz.core.options import Options
from hspz.core.progress import Progress
from hspz.core.scoring import resolve_matrix
from hspz.formats import index as ix
from hspz.formats.manifest import Manifest
from hspz.io.records import Record
from hspz.planning import bins
from hspz.planning import schedule as scheduling
from hspz.planning.budget import devices_for, resolve_max_hits
from hspz.planning.inputs import Inputs
from hspz.run import report
from hspz.run.execute import Execution, Job, execute, print_counts, timed
from hspz.run.pool import Pool
from hspz.run.report import say
from hspz.run.request import Request
from hspz.run.summary import Summary

if TYPE_CHECKING:
    from collections.abc import Callable

    from hspz.engine.contract import Backend


class Work:
    """What one kind of run gives the driver, stage by stage.  `read` fills `ref` and `qry`
    (`qry` stays None when workers read their jobs' queries) and, with an index, `index` and
    `verify`; the defaults are the ones every kind shares."""

    ref: list  # the reference's records, or an index's KnownRecords
    qry: list[Record] | None = None
    index: ix.Index | None = None
    verify: ix.Verification | None = None

    def read(self, req: Request) -> None:
        raise NotImplementedError

    def freeze(self, req: Request, devices: scheduling.Devices) -> list[Job]:
        """Every job's frozen plan, and where its output goes."""
        raise NotImplementedError

    def count_only(self, req: Request, jobs: list[Job]) -> None:
        """-u: seed and hit counts, nothing extended (one query only)."""
        raise NotImplementedError

    def schedule(
        self, req: Request, jobs: list[Job], devices: scheduling.Devices, summary: Summary
    ) -> scheduling.Schedule:
        raise NotImplementedError

    def workers(
        self, sched: scheduling.Schedule, engine: Backend, jobs: list[Job]
    ) -> AbstractContextManager[Pool | None]:
        """Worker processes started before the run needs them (none: they start with it)."""
        return nullcontext()

    def ready(self, req: Request, jobs: list[Job]) -> None:
        """What is written before the workers run (the dumps, OUT's job entries)."""

    def execution(self, req: Request, jobs: list[Job], summary: Summary) -> Execution:
        return Execution(
            req.options.diagonal_partition,
            bool(req.dump_raw),
            req.hit_stats,
            Progress(sum(len(j.manifest.plan.units) for j in jobs)),
            index=req.index,
            verify=self.verify,
        )

    def report(self, req: Request, summary: Summary, wall: float) -> None:
        """The counts on stderr, and what --time and --hit-stats ask for."""
        print_counts(summary)
        if req.time:
            report.print_time(summary, wall)
            self.time_lines(summary, wall)
        if req.hit_stats:
            assert summary.hit_stats is not None  # kept when asked for
            report.print_hit_stats(summary.hit_stats)

    def time_lines(self, summary: Summary, wall: float) -> None:
        """More --time lines, after the run's own."""

    def publish(self, req: Request, summary: Summary) -> None:
        """Once every job is out: the digest line."""
        print(f"digest: {summary.digest}")


def drive(req: Request, work: Work, select: Callable[[], Backend]) -> Summary:
    """Run `req` through its stages, in order.  `select()` picks the engine once the inputs
    have been read, so bad input is reported before backend notes."""
    t0 = time.perf_counter()
    summary = Summary()
    try:
        with timed(summary.phases, "input"):  # 1. read the inputs (or open the index)
            work.read(req)
        engine = select()  # 2. the engine, and its devices
        devices = devices_for(engine, req.options.gpus)
        with timed(summary.phases, "plan"):  # 3. freeze every job's plan
            jobs = work.freeze(req, devices)
        if req.cpu_only:  # -u: counts after preprocessing, nothing extended
            work.count_only(req, jobs)
            return summary
        sched = work.schedule(req, jobs, devices, summary)  # 4. schedule the units
        if work.index is not None:
            say(index_using_line(work.index, req.reference))
        with work.workers(sched, engine, jobs) as pool:  # 5. start the workers
            work.ready(req, jobs)
            execute(
                jobs,
                sched,
                engine,
                req.options.threads,
                work.ref,
                work.qry,
                work.execution(req, jobs, summary),
                t0,
                summary,
                pool,
            )  # 6. run, emit
            if work.index is not None:
                say(index_loaded_line(work.index, summary, req.reference))
            work.report(req, summary, time.perf_counter() - t0)  # 7. report
            work.publish(req, summary)  # 8. the digest line(s); a query list's queries.tsv
    finally:
        if work.verify is not None:
            work.verify.close()
    return summary


class Given(Work):
    """A run of records already read (`compare`, `benchmark`): `inputs.plan` as it stands
    (no manifest file, no preflight), nothing printed, every UnitResult kept."""

    def __init__(self, inputs: Inputs, progress: Progress | None = None):
        self.inputs, self.progress = inputs, progress

    def read(self, req: Request) -> None:
        self.ref, self.qry = self.inputs.reference, self.inputs.query

    def freeze(self, req: Request, devices: scheduling.Devices) -> list[Job]:
        o, ref, qry = req.options, self.inputs.reference, self.inputs.query
        matrix = resolve_matrix(o.xdrop, o.scoring, o.ambiguous)
        resolved = o.replace(max_hits=resolve_max_hits(o, devices))
        m = Manifest(
            resolved,
            matrix,
            self.inputs.plan,
            [r.name for r in ref],
            [len(r) for r in ref],
            [r.name for r in qry],
            [len(r) for r in qry],
            "-",
            "-",
        )
        return [Job(m, req.output, req.tarball)]

    def schedule(
        self, req: Request, jobs: list[Job], devices: scheduling.Devices, summary: Summary
    ) -> scheduling.Schedule:
        m = jobs[0].manifest
        ref_bp = bins.bin_bp(m.plan.ref_bins, m.ref_lengths)
        return scheduling.run_schedule(m.plan, ref_bp, req.options.gpus, devices)

    def execution(self, req: Request, jobs: list[Job], summary: Summary) -> Execution:
        return Execution(req.options.diagonal_partition, progress=self.progress, keep_results=True)

    def report(self, req: Request, summary: Summary, wall: float) -> None:
        pass

    def publish(self, req: Request, summary: Summary) -> None:
        pass


def drive_given(
    options: Options,
    inputs: Inputs,
    outdir: str | Path,
    engine: Backend,
    tarball: str | Path | None = None,
    progress: Progress | None = None,
) -> Summary:
    """Run `inputs.plan` through `engine` into `outdir` (the in-library entry point used by
    `compare` and `benchmark`): --gpus workers, no manifest, no preflight."""
    req = Request(options, set(), None, "-", str(outdir), None if tarball is None else str(tarball))
    return drive(req, Given(inputs, progress), lambda: engine)


def index_using_line(idx: ix.Index, reference: str | None) -> str:
    m = idx.manifest
    check = (
        f"reference {reference} verified in the background"
        if reference
        else "no reference given: the index is trusted, its pieces still verified as they load"
    )
    return (
        f"index: using {idx.path} ({len(m.bins)} bin(s) of {len(m.names)} record(s), "
        f"seed {m.pattern}, step {m.step}, -B {m.seq_block_size}"
        f"{', --kegalign-bins' if m.kegalign_bins else ''}); {check}"
    )


def index_loaded_line(idx: ix.Index, summary: Summary, reference: str | None) -> str:
    loads = sum(r.loads for r in summary.reports)
    assert summary.schedule is not None  # set once the run is scheduled
    visited = [v.ref_bin for vs in summary.schedule.visits for v in vs]
    size = sum(
        e.length * ix.ARRAYS[name].itemsize
        for b in visited
        for (bb, name), e in idx.manifest.arrays.items()
        if bb == b
    )
    line = (
        f"index: loaded {loads} bin(s) ({size / 2**30:.2f} GiB), every 64 MiB piece "
        f"matching its checksum"
    )
    if reference:
        line += (
            f"; {reference} matches the index (records hash {idx.manifest.records_digest[:16]}…)"
        )
    return line
