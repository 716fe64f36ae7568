"""`hspZ hits-estimate`: the exact seed hits of every work unit, by histogram dot products on
the CPU, before any GPU work."""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from hspz.engine.contract import Context
from hspz.formats import index as ix
from hspz.io.readers import read_both, read_side
from hspz.io.records import Record
from hspz.planning import bins as planning
from hspz.planning import estimate
from hspz.planning import schedule as scheduling
from hspz.planning.inputs import Inputs, make_plan
from hspz.planning.pricing import Pricing, features
from hspz.run.execute import say
from hspz.run.freeze import context_of, load_manifest
from hspz.run.request import Request
from hspz.stages.seed import SeedShape


def estimate_command(req: Request, stride: int, pricing: Pricing | None = None) -> int:
    """`hspZ hits-estimate`: the exact seed hits of every unit, by histogram dot products;
    with `pricing`, each unit's projected GPU time and the wall at --gpus W."""
    t0 = time.perf_counter()
    idx = None
    ref: list  # the records, or an index's KnownRecords
    if req.index:
        idx, ref, verify = ix.open_checked(req.index, req.options, req.reference)
        qry = read_side(req.query, "query")
    else:
        assert req.reference is not None  # the CLI requires -r without --index
        ref, qry = read_both(req.reference, req.query)
    m = load_manifest(req, ref, qry)
    if m is not None:
        ctx, p = context_of(m), m.plan
    else:
        ctx = Context(
            req.options, SeedShape.from_pattern(req.options.pattern), np.zeros((8, 8), np.int32)
        )
        p = make_plan(req.options, ref, qry)
    if idx is not None:
        ix.check_plan(idx, p.ref_bins)
        if verify is not None:
            try:
                verify.wait("verify")
            finally:
                verify.close()
    if req.dump_plan:
        from hspz.run import report

        report.write_plan(req.dump_plan, Inputs(ref, qry, p))
    rows: list[tuple]  # a priced row ends with its time as text
    rows, times = estimate_rows(ctx, p, ref, qry, stride, idx)
    if pricing is not None:
        sched, costs = priced(p, rows, pricing, req.options.gpus)
        rows = [(*row, f"{c:.3f}") for row, c in zip(rows, costs, strict=True)]
    sys.stdout.write("".join("\t".join(str(x) for x in row) + "\n" for row in rows))
    if pricing is not None:
        say(projection_lines(sched, len(p.query_bins), rows, costs, pricing, req.options.gpus))
    me = estimate_peak_mib()
    say(
        f"hits-estimate: R={len(p.ref_bins)} Q={len(p.query_bins)} stride={stride} "
        f"threads={req.options.threads or os.cpu_count()} query_s={times[0]:.3f} "
        f"reference_s={times[1]:.3f} total_s={time.perf_counter() - t0:.3f} "
        f"peak_rss_mib={me:.0f}"
    )
    return 0


def estimate_rows(
    ctx: Context,
    p: planning.Plan,
    ref: list[Record],
    qry: list[Record],
    stride: int,
    idx: ix.Index | None = None,
) -> tuple[list[tuple[int, ...]], list[float]]:
    """(ref_bin, query_bin, ref_bp, query_bp, hits) per unit, in ordinal order, and the wall
    seconds of the query and reference stages.  Bins run on `--threads` threads (the histogram
    passes release the GIL); one reference histogram per thread is alive at a time.  With an
    index, a reference histogram is its bin's verified index_table, differenced."""
    threads = ctx.options.threads or os.cpu_count() or 1
    ref_bp = planning.bin_bp(p.ref_bins, [len(r) for r in ref])
    qry_bp = planning.bin_bp(p.query_bins, [len(r) for r in qry])

    def query_side(members: tuple[int, ...]) -> np.ndarray:
        return estimate.query_histogram(ctx, [qry[i] for i in members], stride)

    def reference_side(r: int) -> list[tuple[int, ...]]:
        if idx is not None:
            hist = idx.histogram(r)
        else:
            hist = estimate.reference_histogram(
                [ref[i] for i in p.ref_bins[r]], ctx.shape, ctx.options.step
            )
        return [
            (r, q, ref_bp[r], qry_bp[q], estimate.unit_hits(hist, f) * stride)
            for q, f in enumerate(folded)
        ]

    with ThreadPoolExecutor(max_workers=threads) as pool:
        t = time.perf_counter()
        folded = list(pool.map(query_side, p.query_bins))
        t1 = time.perf_counter()
        rows = [row for part in pool.map(reference_side, range(len(p.ref_bins))) for row in part]
    return rows, [t1 - t, time.perf_counter() - t1]


def priced(
    p: planning.Plan, rows: list[tuple], pricing: Pricing, gpus: int
) -> tuple[scheduling.Schedule, list[float]]:
    """The partition `run --gpus` would use (`schedule`; the HSPZ_UNIT_PARTITION knob decides
    as it does for a run) and each unit's projected ms under it, in ordinal order
    (`hspz.planning.pricing`: a worker's first unit carries worker_ms, a visit's first unit the
    reference bin's cost)."""
    nq = len(p.query_bins)
    ref_bp = [row[2] for row in rows[::nq]]
    devices = scheduling.Devices(
        "gpu", tuple(scheduling.DeviceProfile(1, 1, 1, "projected") for _ in range(gpus))
    )
    sched = scheduling.run_schedule(p, ref_bp, gpus, devices)
    order = [scheduling.units_of(v, nq) for v in sched.visits]
    feats = features(
        [r[2] for r in rows],
        [r[3] for r in rows],
        [r[4] for r in rows],
        [r[0] for r in rows],
        order,
    )
    return sched, [float(c) for c in pricing.cost(feats)]


def projection_lines(
    sched: scheduling.Schedule,
    nq: int,
    rows: list[tuple],
    costs: list[float],
    pricing: Pricing,
    gpus: int,
) -> list[str]:
    """The projected GPU time of the whole plan, and the wall at `gpus` GPUs of one class: the
    busiest worker's units under `sched`.  The units' walls only: a run adds its start,
    reading and the tail after the last unit."""
    busy = [sum(costs[o] for o in scheduling.units_of(v, nq)) for v in sched.visits]
    total = sum(costs)
    lines = [
        f"hits-estimate: projected at {pricing.label()}: {total / 1e3:.3f} s "
        f"of GPU time for {len(rows)} units ({sum(r[4] for r in rows)} seed hits)"
    ]
    lines.append(
        f"hits-estimate: at --gpus {gpus}: {sched.workers} worker(s), "
        f"policy={sched.policy}, visits={sched.total_visits}; busiest worker "
        f"{max(busy) / 1e3:.3f} s ("
        + ", ".join(f"worker {k} {b / 1e3:.3f} s" for k, b in enumerate(busy))
        + ")"
    )
    return lines


def estimate_peak_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
