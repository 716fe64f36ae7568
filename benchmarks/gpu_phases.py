"""Time the device phases of one seed batch (GPU events), to see where a batch's time goes.

    python benchmarks/gpu_phases.py REF QUERY [--chunk 0] [--repeat 5]

Prints the median ms of: seeds (device seeder) and cumsum, seed ids, the counting sort into
reference order for each --shifts value, the filter alone, the first pass (filter and exact walk)
in seed order ("none") and at each shift, the second walk of all late hits, and the whole device
half; and the hits, filter candidates, survivors and late hits.
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
    ap.add_argument("--shifts", default="none,4,6,8,10,16")
    ap.add_argument("--cap", type=int, default=gpu.CAP, help="first-pass bases per side")
    ap.add_argument("--cap2", type=int, default=gpu.CAP2, help="second-walk bases per side")
    ap.add_argument("--define", action="append", default=[], metavar="NAME=VALUE",
                    help="compile the kernels with this #define (e.g. WALK_WORDS=0: byte loads)")
    a = ap.parse_args()
    gpu.CAP, gpu.CAP2 = a.cap, a.cap2
    gpu.DEFINES.update(d.split("=", 1) for d in a.define)
    ctx = Context.from_options(Options())
    ref = prepare_reference(ctx, 0, read_records(a.reference))
    qry = prepare_query(ctx, 0, read_records(a.query))
    dref, dqry = gpu._device_ref(ctx, ref), gpu._device_query(qry)
    _, strand, chunk = unit_batches(ctx, qry)[a.chunk]
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
        b = timed("batch setup (seeds+cumsum)",
                  lambda: gpu._Batch(ctx, ref, dref, qry, dqry, strand, chunk))
        h_b = int(b.cum[-1])
        seed_id = timed("seed ids", lambda b=b, h_b=h_b: b.seed_ids(0, h_b))
        for shift in shifts:
            if shift is not None:
                timed(f"reference order, shift {shift}",
                      lambda b=b, s=seed_id, h_b=h_b, w=shift: b.ref_order(s, 0, h_b, w))
        cand = timed("filter only (seed order)", lambda b=b, s=seed_id, h_b=h_b: b.filter(
            None, s, 0, h_b, ctx.shape.size))
        for shift in shifts:
            _, late1 = timed(f"first pass, order {shift}",
                             lambda b=b, h_b=h_b, w=shift: b.first_pass(0, h_b, w))
        _, late2 = timed("second walk (all late hits)",
                         lambda b=b, x=late1: b.walk(x, None, 0, len(x), gpu.CAP2, 0))
        done, late = timed("device half (ids, first pass, late)",
                           lambda b=b, h_b=h_b: b.survivors(0, h_b, shifts[0]))
        if late is not None:
            timed("host sweep+gate", lambda d=done, x=late: gpu.host_finish(
                ctx, ref, qry, strand, [(d, x)]))
    kept = sum(len(part[0]) for part in done)
    print(f"batch {a.chunk} {strand} {chunk} {gpu.DEFINES} caps {gpu.CAP}/{gpu.CAP2}: hits {h_b}, kept on device {kept}, "
          f"filter candidates {len(cand)}, late after pass 1: {len(late1)}, after pass 2: {len(late2)}, late for the host {0 if late is None else len(late[0])}")
    for name, t in times.items():
        med = statistics.median(t[1:] or t)
        print(f"  {name:40s} {med:8.3f} ms  {med * 1e6 / max(h_b, 1):.3f} ns/hit")


if __name__ == "__main__":
    main()
