"""`hspZ merge`: replay every worker's results in ordinal order into the outputs, as `run`
writes them: one query's segments files in OUT, or a query-list run's OUT/000001/, ... and
queries.tsv.

    plan file -> every results file checked (and, up to KEEP_BYTES in all, its units kept) ->
    OUT locked -> (a query-list run) the older queries.tsv retired -> each results file's units
    (kept, or the file read again) emitted (a query-list run's jobs
    staged on threads, `hspz.run.replay`) -> every job published -> (a query-list run) stale job
    entries removed, queries.tsv -> the ledger (--ledger)

Each results file is checked before its units are used: its checksums
(`planfile.read_results`), that it belongs to this plan file, that it is one worker's and holds
exactly that worker's units, and that no worker's results come twice or are missing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from hspz.core import durable, jit
from hspz.core.errors import InputError
from hspz.engine.contract import UnitResult
from hspz.formats.planfile import PlanFile, read_plan
from hspz.formats.results import read_results, results_header
from hspz.run.emit import jobs_held_whole
from hspz.run.execute import Emitters, Execution, Job, Summary, print_counts
from hspz.run.outdir import OutLock, Tree, check_disjoint, publish_claims, query_list_claims
from hspz.run.replay import replay
from hspz.run.report import write_ledger
from hspz.stages.hsp import HSP_DTYPE
from hspz.stages.segments import SMALL_LINES


def merge_command(
    plan_path: str,
    outdir: str,
    tarball: str | None,
    diagonal: bool,
    result_paths: list[str],
    wait: bool = False,
    command: str = "",
    ledger: str | None = None,
    threads: int = 0,
) -> int:
    """`hspZ merge`: replay every worker's results in ordinal order into the outputs.  Its
    outputs are checked against its inputs, and every results file is checked (`check_arguments`)
    before OUT is locked and anything is published.  A query-list run's jobs are staged on
    `threads` threads (0: `replay_threads`'s choice; 1: one after the other), every output the
    same."""
    from hspz.commands.query_list import entry_names, finish_query_list, query_list_jobs
    from hspz.run import job_entries as bt

    pf = read_plan(plan_path)
    claims = query_list_claims if pf.query_list else publish_claims
    check_disjoint(
        {
            "--plan": plan_path,
            "RESULT": result_paths,
            "the reference of --plan": pf.reference,
            "a query of --plan": [j.path for j in pf.jobs],
        },
        {"--tarball": tarball if not pf.query_list else None, "--ledger": ledger},
        {
            "--output": Tree(
                outdir, claims, writes=(tarball,) if tarball and not pf.query_list else ()
            )
        },
    )
    size = results_bytes(result_paths)
    if diagonal or not all(map(_formatted, result_paths)):
        jit.expect(size, NUMBA_BYTES)  # beside the checks and reads below
    kept: dict[str, list[UnitResult]] | None = {} if size <= KEEP_BYTES else None
    known: dict[int, str] = {}
    workers = check_arguments(pf, plan_path, result_paths, kept, known)  # before any publish
    with OutLock(outdir, "--output", wait, command, keep_empty=tarball is None):
        summary = Summary(query_list=pf.query_list)
        if pf.query_list:
            bt.check_entries(Path(outdir))
            jobs = query_list_jobs(pf.jobs, Path(outdir), tarball is not None)
            bt.retire(Path(outdir), entry_names(pf.jobs, tarball is not None))
        else:
            jobs = [Job(pf.manifest, outdir, tarball)]
        # a query list's jobs published together, under one journal (`Emitters`, a batch)
        batch = Path(outdir) if pf.query_list else None
        emitters = Emitters(jobs, pf.schedule, Execution(diagonal), summary, batch, known)
        try:
            replay(emitters, _results(pf, workers, kept), threads)
            for j in sorted(emitters.open):
                emitters.finish(j)
            emitters.flush()
        except BaseException:
            emitters.abort()
            raise
        for key in ("seeds", "hits", "raw_hsps", "hsps"):
            setattr(summary, key, sum(getattr(job.summary, key) for job in jobs))
        if ledger:
            write_ledger(ledger, summary)
        print_counts(summary)
        if pf.query_list:
            finish_query_list(Path(outdir), pf.jobs, jobs, tarball is not None)
        else:
            print(f"digest: {jobs[0].summary.digest}")
    return 0


NUMBA_BYTES = SMALL_LINES * HSP_DTYPE.itemsize  # results of as many HSPs as one file's lines
# that take numba's loops: a merge of more loads numba at once.  Its files each hold fewer lines,
# so without it they all took numpy's paths, which hold the GIL: 40 units, 2.5 M lines (119 MB)
# merged in 3.23 s, 4.2 s of CPU, against 2.18 s, 2.4 s of CPU, with numba (dev machine)


KEEP_BYTES = 1 << 29  # results files of at most this much in all are read once: their units,
# checked, wait in memory for the replay (each file was read twice, its checks then its units:
# 0.12 s and 0.33 s of a 50 MB file on the dev machine); larger batches are read again, one
# file at a time, so that the merge's memory does not grow with the workers


def results_bytes(paths: list[str]) -> int:
    """The results files' sizes summed (a file that cannot be read counts 0: it is refused
    by `check_arguments`)."""
    total = 0
    for path in paths:
        try:
            total += os.stat(path).st_size
        except OSError:
            pass
    return total


def check_arguments(
    pf: PlanFile,
    plan_path: str,
    result_paths: list[str],
    kept: dict[str, list[UnitResult]] | None = None,
    known: dict[int, str] | None = None,
) -> dict[str, int]:
    """Every results file checked (its seal, its header, its worker's units; none twice, none
    missing) before the first byte is published: {path: worker}.  Given `kept`, each file's
    units are read with its checks (`read_results`) and kept there by path; given `known`, the
    digests `hspZ work` made of the jobs it ran whole go there, by job."""
    seen: dict[int, str] = {}
    for path in result_paths:
        if kept is None:
            header = results_header(path)
        else:
            header, kept[path] = read_results(path)
        seen[_worker_of(header, pf, path, plan_path, seen)] = path
        if known is not None:
            known.update(_whole_jobs(header, pf, path))
    missing = [str(k) for k in range(pf.schedule.workers) if k not in seen]
    if missing:
        raise InputError(
            f"no results of worker(s) {', '.join(missing)} of {plan_path} "
            f"were given (`hspZ work --worker K` writes each)"
        )
    return {path: k for k, path in seen.items()}


def _results(
    pf: PlanFile, workers: dict[str, int], kept: dict[str, list[UnitResult]] | None
) -> Iterator[list[UnitResult]]:
    """Each results file's units: those `check_arguments` kept, else the file read again
    (every checksum) as the replay reaches it."""
    for path, k in workers.items():
        if kept is not None:
            yield kept.pop(path)
            continue
        header, results = read_results(path)
        if header.get("plan") != pf.digest or header.get("worker") != k:
            raise InputError(f"{path}: changed while merge read it")
        yield results


def _worker_of(header: dict, pf: PlanFile, path: str, plan_path: str, seen: dict[int, str]) -> int:
    """The worker whose results `header` describes, checked against the plan file."""
    if header.get("plan") != pf.digest:
        raise InputError(f"{path}: these results belong to another plan than {plan_path}")
    k, sched = header.get("worker"), pf.schedule
    if not isinstance(k, int) or not 0 <= k < sched.workers:
        raise InputError(f"{path}: worker {k!r} is not a worker of {plan_path}")
    if k in seen:
        raise InputError(f"{path}: the results of worker {k} were given twice (also {seen[k]})")
    planned = sorted(pf.worker_units(k))
    held = sorted(tuple(u) for u in header["units"])
    if held != planned:
        raise InputError(
            f"{path}: holds units {_shown(held, pf)} but worker {k} of "
            f"{plan_path} runs units {_shown(planned, pf)}"
        )
    return k


def _whole_jobs(header: dict, pf: PlanFile, path: str) -> dict[int, str]:
    """{job: digest} of the jobs whose digest the file gives: each must be held whole there."""
    whole = jobs_held_whole(header["units"], [len(job.manifest.plan.units) for job in pf.jobs])
    out = {}
    for key, digest in header["digests"].items():
        j = int(key)
        if j not in whole:
            raise InputError(f"{path}: gives the digest of a job whose units it does not all hold")
        out[j] = digest
    return out


def _formatted(path: str) -> bool:
    """Whether a results file (read unchecked: the checks come later) holds every unit's lines
    and its jobs' digests, so that merge neither formats nor sorts (nor loads numba)."""
    try:
        with open(durable.open_regular(path), "rb") as fh, np.load(fh, allow_pickle=False) as z:
            header = json.loads(z["header"].tobytes())
        units, text, digests = header["units"], header["text"], header["digests"]
        return None not in text and {str(j) for j, _ in units} <= set(digests)
    except Exception:  # unreadable or not one (a header nested too deep, an array larger than
        # memory, ...): the checks refuse it, one line
        return False


def _shown(units: list[tuple[int, int]], pf: PlanFile) -> str:
    """Units as ordinals for one query, as job:ordinal in a query-list run."""
    if not pf.query_list:
        return str([o for _, o in units])
    return "[" + ", ".join(f"{j + 1}:{o}" for j, o in units) + "]"
