"""How fast one core runs alone against all cores busy (issue 24's 16-core ratio).

The CPU backend's `-t 16` against `-t 1` ratio depends on the machine: on one H200 machine one
thread's first pass took 22-25 s of CPU, and the same work on 16 threads 26-30 s in all.  This
probe separates the machine from the code: the same fixed work per thread, run on one thread
alone, then on T threads at once, for two loops that share nothing between threads:

- `spin`: integer arithmetic in registers (no memory): a slowdown here is the cores' clock
  (turbo headroom that one busy core has and T busy cores lose, or vCPUs sharing a core);
- `gather`: random reads of a 32 MiB byte array per thread (independent, so they overlap in
  flight, as the first pass's prefetched walks do): a slowdown beyond `spin`'s is the shared
  caches and memory.

Per thread its ns per step, the median over --repeat rounds; the ratio to one thread alone.

    PYTHONPATH=$PWD python3 benchmarks/core_speed.py --threads 1,2,4,8,16 [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hspz.core.jit import njit  # noqa: E402  (after the path)

STEPS = 200_000_000  # per thread and round: about 0.2-0.4 s of one core
ARRAY = 1 << 25  # bytes each thread's gather reads (beyond L2, within a shared L3)


@njit
def _spin(n, seed):
    x = np.uint64(seed) | np.uint64(1)
    acc = np.uint64(0)
    for _ in range(n):
        x ^= x << np.uint64(13)
        x ^= x >> np.uint64(7)
        x ^= x << np.uint64(17)
        acc += x & np.uint64(0xFF)
    return acc


@njit
def _gather(buf, n, seed):
    mask = np.uint64(len(buf) - 1)
    x = np.uint64(seed) | np.uint64(1)
    score = 0
    for _ in range(n):
        x ^= x << np.uint64(13)
        x ^= x >> np.uint64(7)
        x ^= x << np.uint64(17)
        score += np.int64(buf[x & mask]) - 2
    return score


def _round(kind: str, threads: int, bufs: list[np.ndarray], steps: int) -> list[float]:
    """ns per step of each of `threads` threads running the same loop at once."""

    def one(i: int) -> float:
        t = time.perf_counter()
        if kind == "spin":
            _spin(steps, i + 1)
        else:
            _gather(bufs[i], steps // 8, i + 1)
        return (time.perf_counter() - t) * 1e9 / (steps if kind == "spin" else steps // 8)

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, range(threads)))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", default=f"1,{os.cpu_count()}")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--steps", type=int, default=STEPS)
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    counts = [int(x) for x in a.threads.split(",")]
    rng = np.random.default_rng(1)
    bufs = [rng.integers(0, 5, ARRAY, dtype=np.uint8) for _ in range(max(counts))]
    _spin(1000, 1), _gather(bufs[0], 1000, 1)  # compiled (or loaded) before any round
    rows = []
    for kind in ("spin", "gather"):
        alone = None
        for t in counts:
            per = [
                statistics.median(x)
                for x in zip(
                    *(_round(kind, t, bufs, a.steps) for _ in range(a.repeat)), strict=True
                )
            ]
            mean = statistics.fmean(per)
            alone = alone or mean
            rows.append(
                {
                    "loop": kind,
                    "threads": t,
                    "ns_per_step": mean,
                    "slowest": max(per),
                    "vs_one": mean / alone,
                }
            )
            print(
                f"{kind:6} T={t:2}: {mean:.3f} ns/step a thread (slowest {max(per):.3f}), "
                f"{mean / alone:.3f}x one thread alone",
                flush=True,
            )
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
