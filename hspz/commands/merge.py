"""`hspZ merge`: replay every worker's results in ordinal order into the outputs, as `run`
writes them.  Each results file is checked before its units are used: its checksums
(`manifest.read_results`), that it belongs to this plan file, that it is one worker's and holds
exactly that worker's units, and that no worker's results come twice or are missing."""

from __future__ import annotations

from hspz.emit import Emitter
from hspz.errors import InputError
from hspz.execute import Summary, print_counts, say_removed
from hspz.inputs import table_lookup
from hspz.outdir import OutLock, Tree, check_disjoint


def merge_command(plan_path: str, outdir: str, tarball: str | None, diagonal: bool,
                  result_paths: list[str], wait: bool = False, command: str = "") -> int:
    """`hspZ merge`: replay every worker's results in ordinal order into the outputs.  Its
    outputs are checked against its inputs and OUT is locked before any result is read."""
    from hspz.manifest import read_plan, read_results

    pf = read_plan(plan_path)
    m = pf.manifest
    check_disjoint({"--plan": plan_path, "RESULT": result_paths,
                    "the reference of --plan": pf.reference, "the query of --plan": pf.query},
                   {"--tarball": tarball},
                   {"--output": Tree(outdir, writes=(tarball,) if tarball else ())})
    with OutLock(outdir, "--output", wait, command, keep_empty=tarball is None):
        emitter = Emitter(m.plan.units, table_lookup(m), outdir, tarball, diagonal)
        seen: dict[int, str] = {}
        try:
            for path in result_paths:
                header, results = read_results(path)
                seen[_worker_of(header, pf, path, plan_path, seen)] = path
                for result in results:
                    emitter.add(result)
            missing = [str(k) for k in range(pf.schedule.workers) if k not in seen]
            if missing:
                raise InputError(f"no results of worker(s) {', '.join(missing)} of {plan_path} "
                                 f"were given (`hspZ work --worker K` writes each)")
            digest = emitter.finish()
        except BaseException:
            emitter.abort()
            raise
        say_removed(emitter)
        summary = Summary(**emitter.counts, digest=digest)
        print_counts(summary)
        print(f"digest: {digest}")
    return 0


def _worker_of(header: dict, pf, path: str, plan_path: str, seen: dict[int, str]) -> int:
    """The worker whose results `header` describes, checked against the plan file."""
    if header.get("plan") != pf.digest:
        raise InputError(f"{path}: these results belong to another plan than {plan_path}")
    k, sched = header.get("worker"), pf.schedule
    if not isinstance(k, int) or not 0 <= k < sched.workers:
        raise InputError(f"{path}: worker {k!r} is not a worker of {plan_path}")
    if k in seen:
        raise InputError(f"{path}: the results of worker {k} were given twice (also "
                         f"{seen[k]})")
    q = len(pf.manifest.plan.query_bins)
    planned = sorted(v.ref_bin * q + j for v in sched.visits[k] for j in range(v.first, v.end))
    if sorted(header["units"]) != planned:
        raise InputError(f"{path}: holds units {sorted(header['units'])} but worker {k} of "
                         f"{plan_path} runs units {planned}")
    return k
