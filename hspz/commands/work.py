"""`hspZ work`: run one worker's units of a plan file into one results file (the workflow's
work step), resumable unit by unit.

    plan file -> reference (read and checked, or the index) -> units already done (unit files)
    -> the rest of the worker's units, each written as a unit file as it finishes -> results

With an index, the plan's reference (when it names one) is verified against the index in the
background while the units run, as `run --index -r` verifies it: a file of other records is
refused before any unit runs, and no results file is written until the bases' hash matches.

Every finished unit is written at once, atomically, under --units (default RESULT.units):
a work job killed after hours loses at most the units in flight, and its rerun, or the work of
another plan holding the same job, computes only the units it does not find.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING

from hspz.commands.index import bounded_map
from hspz.commands.query_list import spec_of
from hspz.core import durable, faults
from hspz.core.errors import InputError, UsageError
from hspz.core.progress import Progress
from hspz.engine.contract import Backend, UnitResult
from hspz.formats import index as ix
from hspz.formats.manifest import check_side, check_version
from hspz.formats.planfile import PlanFile, read_plan
from hspz.formats.results import read_unit, unit_key, unit_path, write_results, write_unit
from hspz.io.readers import read_side
from hspz.planning.budget import devices_for
from hspz.run.freeze import context_of
from hspz.run.outdir import check_disjoint
from hspz.run.render import Renderer, RenderFailed
from hspz.run.report import say
from hspz.run.worker import WorkerJob, run_worker

if TYPE_CHECKING:
    from hspz.io.records import Record


def work_command(
    plan_path: str,
    worker: int,
    output: str,
    select: Callable[[], Backend],
    threads: int,
    device: int | None = None,
    index: str | None = None,
    units: str | None = None,
    device_lock: str | None = None,
) -> int:
    """`hspZ work`: run worker `worker`'s units of a plan file into one results file."""
    pf = read_plan(plan_path)
    index = index or pf.index
    folder = units or f"{output}.units"
    check_disjoint(
        {
            "--plan": plan_path,
            "the reference of --plan": pf.reference,
            "--index": index,
            "a query of --plan": [j.path for j in pf.jobs],
        },
        {"--output": output, "--units": folder},
    )
    sched = pf.schedule
    if not 0 <= worker < sched.workers:
        raise UsageError(
            f"--worker: {worker} is not a worker of {plan_path} (0..{sched.workers - 1})"
        )
    for job in pf.jobs:
        check_version(job.manifest, plan_path)
    ref, verify = _reference(pf, index, plan_path)
    lock = None
    try:
        qry = _query(pf, plan_path)
        engine = select()
        if device is None:
            count = devices_for(engine, sched.workers).count
            device, lock = (
                free_device(device_lock, worker, count)
                if device_lock and engine.capabilities.on_device
                else (worker % count, None)
            )
        return _work(pf, worker, output, engine, threads, device, index, folder, ref, qry, verify)
    finally:
        if lock is not None:
            os.close(lock)
        if verify is not None:
            verify.close()


def _reference(
    pf: PlanFile, index: str | None, source: str
) -> tuple[list[Record], ix.Verification | None]:
    """The reference records (none with an index: its bins are loaded), checked against the
    frozen plan; and with an index, the background Verification of the plan's reference
    against it (None without a reference), which the caller closes."""
    m = pf.manifest
    if index is None:
        if pf.reference is None:
            raise UsageError(f"{source}: planned with an index: give --index")
        ref = read_side(pf.reference, "reference")
        check_side(m, "reference", ref, source)
        return ref, None
    idx = ix.open_index(index)
    ix.check_options(idx, m.options)
    ix.check_plan(idx, m.plan.ref_bins)
    ix.check_reference(idx, m.ref_names, m.ref_lengths, m.ref_digest, source)
    if not pf.reference:
        return [], None
    # a FIFO swapped in since the plan would hold the check for ever: refused unread
    durable.check_regular(pf.reference, f"the reference of {source}")
    return [], ix.Verification(pf.reference, idx)


def _query(pf: PlanFile, source: str) -> list[Record]:
    """For one query, its records checked against the frozen plan; for a query list none (the
    workers read each job's query, and check its records, themselves)."""
    if pf.query_list:
        check_queries(pf)
        return []
    qry = read_side(pf.query, "query")
    check_side(pf.manifest, "query", qry, source)
    return qry


def check_queries(pf: PlanFile) -> None:
    """Before any unit runs: every listed query file has the size and sha256 it was planned
    with, so an edited query is refused (exit 2) before a unit file is written.  The files are
    hashed on threads (16 ms for 20 queries of 5 Mbp on the H200 machine, under cProfile); the
    first job in order that fails is the one named."""
    reads = bounded_map(lambda job: ix.file_sha256(job.path), pf.jobs, os.cpu_count() or 1)
    with closing(reads) as hashes:
        for job in pf.jobs:
            try:
                size, sha = next(hashes)
            except OSError as exc:
                raise InputError(
                    f"job {job.name} ({job.path}): cannot read it: {exc.strerror or exc}"
                ) from None
            if (job.size is not None and size != job.size) or (
                job.sha256 not in ("", "-") and sha != job.sha256
            ):
                raise InputError(
                    f"job {job.name} ({job.path}): the file changed since the batch "
                    f"was planned ({size} bytes, sha256 {sha[:16]}… here; {job.size} "
                    f"bytes, {job.sha256[:16]}… planned)"
                )


def _work(
    pf: PlanFile,
    worker: int,
    output: str,
    engine: Backend,
    threads: int,
    device: int,
    index: str | None,
    folder: str,
    ref: list[Record],
    qry: list[Record],
    verify: ix.Verification | None = None,
) -> int:
    if verify is not None:  # a reference of other records: refused before any unit
        verify.wait_shape("verify")
    keys = [unit_key(j.manifest) for j in pf.jobs]
    planned = pf.worker_units(worker)
    done: list[UnitResult] = []
    for j, o in planned:
        found = read_unit(unit_path(folder, keys[j], o), keys[j], j, o)
        if found is not None:
            done.append(found)
    if done:
        say(
            f"work: worker {worker} resumes: {len(done)} of {len(planned)} unit(s) already "
            f"done in {folder}; computing {len(planned) - len(done)}"
        )
    Path(folder).mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    m = pf.manifest
    plan = pf.grid() if pf.query_list else m.plan
    specs = [spec_of(j) for j in pf.jobs] if pf.query_list else None
    job = WorkerJob(
        worker,
        device,
        pf.schedule.visits[worker],
        context_of(m),
        plan,
        engine,
        threads,
        t0,
        index=index,
        queries=specs,
        skip=frozenset((r.job, r.ordinal) for r in done),
    )
    results: list[UnitResult] = []
    # `progress:` lines in the job's log, as `run` prints them (a tenth of the units at a time)
    progress = Progress(len(planned) - len(done), len({j for j, _ in planned}) or 1)
    # every unit's lines formatted, and whole jobs' digests made, while the worker runs
    renderer = Renderer([j.manifest for j in pf.jobs], planned)

    def keep(result: UnitResult, _: object) -> None:
        write_unit(folder, keys[result.job], result)
        results.append(result)
        renderer.add(result)
        progress.unit_done((result.job, result.ordinal), result.hits)
        faults.point("work-unit")

    try:
        try:
            for result in done:
                renderer.add(result)
            rep = run_worker(job, ref, qry, keep, progress.advance)
        except RenderFailed:  # a unit's formatting failed: its error, not the worker's
            renderer.close()
            raise
        finally:
            progress.close()
        digests = renderer.close()
    finally:
        renderer.shutdown()
    if verify is not None:  # no results until the reference's bases match the index's
        digest = verify.wait("verify")
        say(f"work: {pf.reference} matches the index (records hash {digest[:16]}…)")
    write_results(
        output,
        done + results,
        dict(
            plan=pf.digest,
            worker=worker,
            workers=pf.schedule.workers,
            busy_ms=rep.busy_ms,
            finished_ms=rep.finished_ms,
        ),
        digests,
    )
    say(
        f"work: worker {worker} ran {len(results)} unit(s) in {rep.finished_ms / 1e3:.3f} s "
        f"on device {device}"
        + (
            f" (CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']})"
            if "CUDA_VISIBLE_DEVICES" in os.environ
            else ""
        )
        + f" -> {output}"
    )
    return 0


def free_device(folder: str, worker: int, count: int) -> tuple[int, int]:
    """The first device of `count` whose lock in `folder` is free, from worker mod count on;
    waits for that one when all are taken.  (device, the locked descriptor, held until the
    process exits.)  Snakemake runs at most `resources: gpu` such jobs at once, so one is
    free unless another program holds it."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    order = [(worker + i) % count for i in range(count)]
    for d in order:
        fd = durable.open_lock(Path(folder) / f"device{d}.lock", "--device-lock")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return d, fd
        except BlockingIOError:
            os.close(fd)
    fd = durable.open_lock(Path(folder) / f"device{order[0]}.lock", "--device-lock")
    print(
        f"work: every device lock in {folder} is taken; waiting for device {order[0]}",
        file=sys.stderr,
    )
    fcntl.flock(fd, fcntl.LOCK_EX)
    return order[0], fd
