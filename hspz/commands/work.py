"""`hspZ work`: run one worker's units of a plan file into one results file."""

from __future__ import annotations

import sys
import time

from hspz.budget import devices_for
from hspz.engine import UnitResult
from hspz.errors import UsageError
from hspz.freeze import context_of
from hspz.inputs import read_both
from hspz.manifest import check_inputs, check_version
from hspz.outdir import check_disjoint
from hspz.workers import WorkerJob, run_worker


def work_command(plan_path: str, worker: int, output: str, select, threads: int,
                 device: int | None = None) -> int:
    """`hspZ work`: run one worker's units of a plan file into one results file."""
    from hspz.manifest import read_plan, write_results

    pf = read_plan(plan_path)
    check_disjoint({"--plan": plan_path, "the reference of --plan": pf.reference,
                    "the query of --plan": pf.query}, {"--output": output})
    m, sched = pf.manifest, pf.schedule
    if not 0 <= worker < sched.workers:
        raise UsageError(f"--worker: {worker} is not a worker of {plan_path} "
                         f"(0..{sched.workers - 1})")
    check_version(m, plan_path)
    ref, qry = read_both(pf.reference, pf.query)
    check_inputs(m, ref, qry, plan_path)
    engine = select()
    if device is None:
        device = worker % devices_for(engine, sched.workers).count
    t0 = time.perf_counter()
    job = WorkerJob(worker, device, sched.visits[worker], context_of(m), m.plan,
                    engine.__name__, threads, t0)
    results: list[UnitResult] = []
    rep = run_worker(job, ref, qry, lambda r, _: results.append(r))
    write_results(output, results, dict(plan=pf.digest, worker=worker, workers=sched.workers,
                                        busy_ms=rep.busy_ms, finished_ms=rep.finished_ms))
    print(f"work: worker {worker} ran {len(results)} unit(s) in {rep.finished_ms / 1e3:.3f} s "
          f"-> {output}", file=sys.stderr)
    return 0
