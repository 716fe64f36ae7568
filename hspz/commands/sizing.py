"""Per-worker job sizes for a scheduler (`hspZ plan --sizes FILE`): the host memory each work
job needs and its expected runtime, so that the workflow asks SLURM (and the local scheduler)
for what the plan will use instead of one figure for every job.

Memory is the preflight's own estimate for the backend the job uses: on the CPU backend
`plan.cpu_estimate` of one worker process (what `--time` prints as the memory estimate, whose
measured peak / estimate ratios are in its docstring), the largest over the query-list run's jobs;
on the GPU the host side only, the same reading terms plus GPU_HOST_BYTES for the CUDA context and
CuPy (the device memory is sized by the GPU budget, `budget.device_budget`, and is not the
scheduler's to grant).

Runtime is the seed hits of the worker's units (the exact histogram count of `hspZ
hits-estimate`) times a measured cost per hit, plus fixed costs per unit and per process; the
figures and their sources are in BENCHMARKS.md ("Job sizes for the workflow").  The CPU figure
is for one thread and is divided by the job's threads.  A workflow multiplies both by its
safety factor.

The file is a TSV: worker, backend, units, hits, mem_mb, runtime_s.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from hspz.core.durable import write_text

if TYPE_CHECKING:
    from hspz.core.options import Options
    from hspz.formats.index import Index
    from hspz.formats.manifest import Manifest
    from hspz.formats.planfile import PlanFile
    from hspz.io.records import Record
    from hspz.planning.schedule import Devices

# GPU: ns per seed hit, ms per unit and per worker, fitted on L100 (BENCHMARKS.md, "GPU ns per
# seed hit": 0.0859 ns/hit + 287 ms/unit + 361 ms/worker; the median 0.1139 ns/hit of L100's
# cold runs is the plain figure used here, as it folds the fixed costs of a few-unit run in).
GPU_NS_PER_HIT = 0.1139
GPU_UNIT_S = 0.287
GPU_START_S = 20.0  # Python, CuPy and CUDA's start, the first kernels' compilation (1-15 s)
# CPU, one thread: H. pylori G27 x ELS37, 14,610,701 hits, engine 6.954 s (476 ns/hit) on the
# dev machine at load 4 (BENCHMARKS.md, "Job sizes for the workflow").
CPU_NS_PER_HIT = 476.0
CPU_UNIT_S = 0.5
CPU_START_S = 5.0
GPU_HOST_BYTES = 2 << 30
STRIDE = 8  # hits counted on every 8th query position (times 8): a runtime needs no more


def host_bytes(m: Manifest, options: Options, devices: Devices) -> int:
    """Host memory of one work process running this job's units."""
    from hspz.planning import memory as planning
    from hspz.run.freeze import memory_estimate

    if devices.backend == "cpu":
        estimate = memory_estimate(options.replace(gpus=1), devices, m)
        assert estimate is not None  # None only on the GPU backend
        return estimate.total
    inputs = sum(m.ref_lengths) + sum(m.qry_lengths)
    return planning.CPU_PROCESS + (1 + planning.READ_COPIES) * inputs + GPU_HOST_BYTES


def size_rows(
    pf: PlanFile,
    options: Options,
    devices: Devices,
    ref: list[Record],
    idx: Index | None,
    read_query: Callable[[str], list[Record]],
    count_hits: bool = True,
) -> list[tuple]:
    """(worker, backend, units, hits, mem_mb, runtime_s) of every worker of a plan file;
    `read_query(path)` reads a job's query records.  Without `count_hits` (the histograms
    cost seconds and a few hundred MB a job) hits and runtime_s are "-"."""
    from hspz.commands.estimate import estimate_rows
    from hspz.run.freeze import context_of

    hits: list[list[int]] = []
    memory: list[int] = []
    for job in pf.jobs:
        memory.append(host_bytes(job.manifest, options, devices))
        if not count_hits:
            continue
        qry = read_query(job.path)
        rows, _ = estimate_rows(context_of(job.manifest), job.manifest.plan, ref, qry, STRIDE, idx)
        hits.append([row[4] for row in rows])
        del qry
    gpu = devices.backend == "gpu"
    threads = max(1, options.threads or os.cpu_count() or 1)
    out: list[tuple] = []
    for k in range(pf.schedule.workers):
        units = pf.worker_units(k)
        jobs = {j for j, _ in units}
        mem = math.ceil(max((memory[j] for j in jobs), default=0) / 1e6)
        if not count_hits:
            out.append((k, "gpu" if gpu else "cpu", len(units), "-", mem, "-"))
            continue
        n_hits = sum(hits[j][o] for j, o in units)
        if gpu:
            seconds = GPU_START_S + len(units) * GPU_UNIT_S + n_hits * GPU_NS_PER_HIT / 1e9
        else:
            seconds = (
                CPU_START_S + len(units) * CPU_UNIT_S + n_hits * CPU_NS_PER_HIT / 1e9 / threads
            )
        out.append((k, "gpu" if gpu else "cpu", len(units), n_hits, mem, math.ceil(seconds)))
    return out


def write_sizes(path: str, rows: list[tuple]) -> None:
    head = "worker\tbackend\tunits\thits\tmem_mb\truntime_s\n"
    write_text(path, head + "".join("\t".join(map(str, r)) + "\n" for r in rows), "--sizes")
