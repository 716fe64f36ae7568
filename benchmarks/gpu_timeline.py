"""Where a unit's GPU time goes between kernels: host time per group, device time per group.

    python benchmarks/gpu_timeline.py REF QUERY [--runs 2] [--threads 0] [--host-threads 4]
        [--group-bases N] [--switch-ms 5] [--quiet]

Runs `gpu.run_unit` on one single-bin pair `--runs` times (the first warms the caches) and, for
the last run, prints each group's host span (`run_group`: launches, syncs, the split by chunk)
and the device time between events recorded at each group's start and end, then totals: the
unit's GPU time, the groups' summed device and host time, and the host threads' summed
`host_finish` time (which competes with the launching thread for the GIL).
"""

from __future__ import annotations

import argparse
import sys
import time

import cupy as cp

from hspz.engine import Context, gpu, prepare_query, prepare_reference
from hspz.options import Options
from hspz.sequence import read_records


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("reference")
    ap.add_argument("query")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="host threads (0: every core)")
    ap.add_argument("--host-threads", type=int, default=gpu.HOST_THREADS,
                    help="cap on the host halves' threads (gpu.HOST_THREADS)")
    ap.add_argument("--group-bases", type=int, default=gpu.GROUP_BASES,
                    help="window starts per group (gpu.GROUP_BASES)")
    ap.add_argument("--switch-ms", type=float, default=None,
                    help="the interpreter's GIL switch interval during the runs")
    ap.add_argument("--quiet", action="store_true", help="totals only")
    a = ap.parse_args()
    gpu.set_threads(a.threads)
    gpu.HOST_THREADS = a.host_threads
    gpu.GROUP_BASES = a.group_bases
    if a.switch_ms is not None:
        sys.setswitchinterval(a.switch_ms / 1e3)
    ctx = Context.from_options(Options())
    ref = prepare_reference(ctx, 0, read_records(a.reference))
    qry = prepare_query(ctx, 0, read_records(a.query))
    rows: list[tuple] = []
    finish: list[float] = []
    run_group, host_finish = gpu.run_group, gpu.host_finish

    def timed_group(*args, **kw):
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        t0 = time.perf_counter()
        e0.record()
        out = run_group(*args, **kw)
        e1.record()
        rows.append((len(args[3]), time.perf_counter() - t0, e0, e1))
        return out

    def timed_finish(*args, **kw):
        t0 = time.perf_counter()
        out = host_finish(*args, **kw)
        finish.append(time.perf_counter() - t0)
        return out

    gpu.run_group, gpu.host_finish = timed_group, timed_finish
    for _ in range(a.runs):
        rows.clear()
        finish.clear()
        t0 = time.perf_counter()
        result = gpu.run_unit(ctx, ref, qry, 0)
        wall = time.perf_counter() - t0
    device = [cp.cuda.get_elapsed_time(e0, e1) for _, _, e0, e1 in rows]
    for i, ((batches, host, _, _), dev) in enumerate(zip(rows, device, strict=True)):
        if a.quiet:
            break
        print(f"group {i:3d}: {batches:3d} batches  host {host * 1e3:8.2f} ms  device "
              f"{dev:8.2f} ms")
    print(f"groups of {gpu.GROUP_BASES}, threads {min(gpu._state['threads'], gpu.HOST_THREADS)} switch "
          f"{sys.getswitchinterval() * 1e3:g} ms: unit: wall {wall * 1e3:.1f} ms, GPU {result.gpu_ms:.1f} ms, {result.hits} hits, "
          f"{result.gpu_ms * 1e6 / max(result.hits, 1):.4f} ns/hit; groups: host "
          f"{sum(r[1] for r in rows) * 1e3:.1f} ms, device {sum(device):.1f} ms; host_finish "
          f"{len(finish)} chunks, {sum(finish) * 1e3:.1f} ms summed over threads")


if __name__ == "__main__":
    main()
