"""Time the device phases of one seed batch (GPU events), to see where a batch's time goes.

    python benchmarks/gpu_phases.py REF QUERY [--chunk 0] [--group N] [--repeat 5]

Times the group of seed batches holding batch --chunk (`batch_groups`).  Prints the median ms of:
seeds (device seeder), cumsum and edges; the counting sort into reference order for each --shifts
value, the filter alone, the first pass (filter and exact walk) in seed order ("none") and at each
shift, the second walk of all late hits (these over the first piece); the whole device half and
the split by chunk; and the hits, filter candidates, survivors and late hits.
"""

from __future__ import annotations

import argparse
import statistics

import cupy as cp

from hspz.engine import Context, gpu, prepare_query, prepare_reference, unit_batches
from hspz.options import Options
from hspz.sequence import read_records


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("reference")
    ap.add_argument("query")
    ap.add_argument("--chunk", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--group", type=int, default=gpu.GROUP_BASES,
                    help="window starts per group (the batches around --chunk)")
    ap.add_argument("--shifts", default="none,4,6,8,10,16")
    ap.add_argument("--cap", type=int, default=gpu.CAP, help="first-pass bases per side")
    ap.add_argument("--cap2", type=int, default=gpu.CAP2, help="second-walk bases per side")
    a = ap.parse_args()
    gpu.CAP, gpu.CAP2 = a.cap, a.cap2
    ctx = Context.from_options(Options())
    ref = prepare_reference(ctx, 0, read_records(a.reference))
    qry = prepare_query(ctx, 0, read_records(a.query))
    dref, dqry = gpu._device_ref(ctx, ref), gpu._device_query(ctx, qry)
    jobs = unit_batches(ctx, qry)
    group = [i for i in gpu.batch_groups(jobs, a.group) if a.chunk in i][0]
    strand, chunks = jobs[a.chunk][1], [jobs[i][2] for i in group]
    times: dict[str, list[float]] = {}
    shifts = [None if x == "none" else int(x) for x in a.shifts.split(",")]

    def timed(name, fn):
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record()
        out = fn()
        e1.record()
        e1.synchronize()
        times.setdefault(name, []).append(cp.cuda.get_elapsed_time(e0, e1))
        return out

    for _ in range(a.repeat):
        g = timed("group setup (seeds, cumsum, edges)",
                  lambda: gpu._Group(ctx, dref, qry, dqry, strand, chunks))
        n = min(g.total, gpu.PIECE)
        g.use_chunks([int(x) for x in g.hit_edges[:-1]])
        for shift in shifts:
            if shift is not None:
                timed(f"reference order, shift {shift}",
                      lambda g=g, n=n, w=shift: g.ref_order(0, n, w))
        cand, _ = timed("filter only (seed order)", lambda g=g, n=n: g.filter(
            None, None, 0, n, ctx.shape.size))
        for shift in shifts:
            _, late1, tag1 = timed(f"first pass, order {shift}",
                                   lambda g=g, n=n, w=shift: g.first_pass(0, n, w))
        _, late2, _ = timed("second walk (all late hits)",
                            lambda g=g, x=late1, t=tag1: g.walk(x, t, gpu.CAP2, 0))
        R, Q, T = timed("late: sort by diagonal", lambda g=g, x=late1, t=tag1: gpu.by_diagonal(
            x, t, g.dref.len, g.qlen))
        short = timed("late: short diagonals", lambda R=R, Q=Q: gpu._short_diagonals(
            R, Q, gpu.CAP2))
        timed("late: select and pack the short", lambda R=R, Q=Q, T=T, s=short: (
            gpu._pack(R[s], Q[s]), T[s]))
        pieces = timed("device half (first pass, late)", lambda g=g, n=n: [
            g.survivors(h0, min(h0 + gpu.PIECE, g.total), shifts[0])
            for h0 in range(0, g.total, gpu.PIECE)])
        swept = sum(len(x[0]) for _, x in pieces)
        rows = timed("finish (sweep, collapse, counts)", lambda g=g, p=pieces: g.finish(p))
    kept = len(rows[0])
    print(f"batches {group[0]}..{group[-1]} {strand} caps {gpu.CAP}/{gpu.CAP2}: "
          f"hits {g.total} (timed phases: first {n}), distinct HSPs to the host {kept}, "
          f"filter candidates {len(cand)}, late after pass 1: {len(late1)}, after pass 2: "
          f"{len(late2)}, swept {swept}")
    for name, t in times.items():
        med = statistics.median(t[1:] or t)
        hits = g.total if name.startswith(("group", "device", "finish")) else n
        print(f"  {name:40s} {med:8.3f} ms  {med * 1e6 / max(hits, 1):.3f} ns/hit")


if __name__ == "__main__":
    main()
