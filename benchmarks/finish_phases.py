"""Where the device's finish of each group goes (`gpu._Group.finish`), one synchronised timer per
phase, with the sizes each phase sees.

    python benchmarks/finish_phases.py REF QUERY [--runs 2] [--chain-cap N]

Runs `gpu.run_unit` on one single-bin pair `--runs` times (the first warms the caches) and, for
the last run, prints per phase its summed time and sizes: the walks before the finish
(`survivors`), the late hits' diagonal sort, the chain walks (hits, how many capped), the serial
sweep of capped diagonals (hits), collapsing identical rows (rows in, distinct out) and the
match counts.  The timers synchronise the device, so the phases add up to more than the unit's
GPU time; they say where it goes, not how long the unit takes.
"""

from __future__ import annotations

import argparse
import collections
import functools
import time

import cupy as cp

from hspz.engine import Context, gpu, prepare_query, prepare_reference
from hspz.options import Options
from hspz.sequence import read_records

TIMES: dict[str, float] = collections.defaultdict(float)
SIZES: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])


def timed(name: str, fn, sizes=None):
    @functools.wraps(fn)
    def wrapper(*args, **kw):
        cp.cuda.Device().synchronize()
        t = time.perf_counter()
        out = fn(*args, **kw)
        cp.cuda.Device().synchronize()
        TIMES[name] += time.perf_counter() - t
        if sizes is not None:
            for i, v in enumerate(sizes(args, out)):
                SIZES[name][i] += int(v)
        return out
    return wrapper


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("reference")
    ap.add_argument("query")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--chain-cap", type=int, default=gpu.CHAIN_CAP, help="gpu.CHAIN_CAP")
    a = ap.parse_args()
    gpu.CHAIN_CAP = a.chain_cap
    G = gpu._Group
    G.survivors = timed("walks before the finish (survivors)", G.survivors)
    gpu.by_diagonal = timed("late hits: sort by diagonal", gpu.by_diagonal,
                            lambda args, out: (len(out[0]), 0))
    G._chains = timed("chain walks + resolve (hits, capped)", G._chains,
                      lambda args, out: (len(args[1]), int(out[1].sum())))
    G._sweep_serial = timed("serial sweep of capped diagonals (hits)", G._sweep_serial,
                            lambda args, out: (len(args[1]), 0))
    gpu._distinct = timed("collapse identical rows (in, out)", gpu._distinct,
                          lambda args, out: (len(args[0][0]), len(out[0][0])))
    G.match_counts = timed("match counts (rows)", G.match_counts,
                           lambda args, out: (len(args[1]), 0))
    G.finish = timed("finish in all", G.finish)
    ctx = Context.from_options(Options())
    ref = prepare_reference(ctx, 0, read_records(a.reference), host_codes=False)
    qry = prepare_query(ctx, 0, read_records(a.query), host_codes=False)
    for run in range(a.runs):
        TIMES.clear()
        SIZES.clear()
        result = gpu.run_unit(ctx, ref, qry, run)
    print(f"chain cap {gpu.CHAIN_CAP}; unit: {result.hits} hits, {result.hsps} HSPs, GPU time {result.gpu_ms:.1f} ms "
          "(with the timers' synchronisations)")
    for name, t in TIMES.items():
        print(f"  {name:44s} {t * 1e3:9.2f} ms  {SIZES[name] if name in SIZES else ''}")


if __name__ == "__main__":
    main()
