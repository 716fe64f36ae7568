"""What the exact diagonal sweep saves over walking every late hit on its own (CPU backend).

    python benchmarks/sweep_savings.py REF QUERY [--strand minus] [--sample 200]

For each wga chunk of one strand: the first pass (`xdrop.first_pass`), then the sweep over the
hits it hands over (timed), and the plain per-hit walk timed on `--sample` random late hits and scaled to all
of them (walking all of them on E. coli's minus strand would take about 40 minutes).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from hspz import xdrop
from hspz.engine import Context, prepare_query, prepare_reference
from hspz.options import Options
from hspz.seed import hit_seeds
from hspz.sequence import read_records


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("reference")
    ap.add_argument("query")
    ap.add_argument("--strand", default="minus", choices=("plus", "minus"))
    ap.add_argument("--sample", type=int, default=200)
    a = ap.parse_args()
    ctx = Context.from_options(Options())
    ref = prepare_reference(ctx, 0, read_records(a.reference))
    qry = prepare_query(ctx, 0, read_records(a.query))
    flat = ctx.matrix.ravel().astype(np.int32)
    rng = np.random.default_rng(1)
    codes, score = qry.seed[a.strand], qry.score[a.strand]
    rl, ql = ref.packed.block_len, qry.packed[a.strand].block_len
    sweep_s = plain_s = 0.0
    late_total = 0
    for first in range(0, ql, 250_000):
        _, qpos, lo, counts, _ = hit_seeds(codes, ctx.shape, first, first + 250_000, True,
                                           ref.table)
        _, (R, Q) = xdrop.first_pass(ref.score, score, rl, ql, ctx.matrix, 910,
                                     ref.table.pos_table, lo, qpos, counts, ctx.shape.size, 3000)
        n_late = len(R)
        late_total += n_late
        t = time.perf_counter()
        xdrop.extend_hits(ref.score, score, rl, ql, ctx.matrix, 910, R, Q)
        sweep_s += time.perf_counter() - t
        k = min(a.sample, n_late)
        if k:
            pick = rng.choice(n_late, k, replace=False)
            t = time.perf_counter()
            xdrop.extend_plain(ref.score, score, rl, ql, flat, 910, R[pick], Q[pick])
            plain_s += (time.perf_counter() - t) * n_late / k
    print(f"{a.strand} strand: {late_total} late hits; sweep {sweep_s:.2f} s; plain per-hit walk "
          f"about {plain_s:.0f} s (scaled from {a.sample} sampled hits per chunk)")


if __name__ == "__main__":
    main()
