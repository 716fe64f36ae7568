"""Reports: counts, progress, --time tables, --dump-plan / --dump-raw files, --cpu-only counts."""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from hspz.engine import Context, prepare_query, prepare_reference
from hspz.options import Options


def progress_printer(stream=sys.stderr, every_s: float = 10.0):
    """A callback printing `progress: k/n units` at most every few seconds, and at the end."""
    last = [time.perf_counter()]
    done = [0]

    def report(unit, total: int) -> None:
        done[0] += 1
        now = time.perf_counter()
        if done[0] == total or now - last[0] >= every_s:
            print(f"progress: {done[0]}/{total} units", file=stream)
            last[0] = now

    return report


def _atomic_write(path: str, data: bytes) -> None:
    tmp = f"{path}.partial"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def write_plan(path: str, inputs, options: Options) -> None:
    """`reference|query<TAB>bin<TAB>name<TAB>bp` per record, reference first, unprefixed."""
    rows = []
    for side, bins, records in (
        ("reference", inputs.plan.ref_bins, inputs.reference),
        ("query", inputs.plan.query_bins, inputs.query),
    ):
        for b, members in enumerate(bins):
            rows += [f"{side}\t{b}\t{records[i].name}\t{len(records[i])}\n" for i in members]
    _atomic_write(path, "".join(rows).encode())


def write_raw(path: str, summary) -> None:
    """Every pre-dedup HSP: `strand ref_start query_start len score`, block-relative, 0-based."""
    parts = []
    for result in summary.results:
        for strand, h in result.raw:
            if len(h):
                cols = np.stack([h["ref_start"], h["query_start"], h["len"]]).T.astype(np.int64)
                body = "\n".join(
                    f"{strand}\t{a}\t{b}\t{c}\t{s}"
                    for (a, b, c), s in zip(cols.tolist(), h["score"].tolist(), strict=True)
                )
                parts.append(body + "\n")
    _atomic_write(path, "".join(parts).encode())


def cpu_only(options: Options, inputs) -> int:
    """`-u`: seed and hit counts after CPU preprocessing, without extending."""
    from hspz.engine.cpu import count_unit

    ctx = Context.from_options(options)
    p = inputs.plan
    seeds = hits = 0
    queries = [
        prepare_query(ctx, q, [inputs.query[i] for i in members])
        for q, members in enumerate(p.query_bins)
    ]
    for r, members in enumerate(p.ref_bins):
        ref = prepare_reference(ctx, r, [inputs.reference[i] for i in members])
        for qry in queries:
            s, h = count_unit(ctx, ref, qry)
            seeds += s
            hits += h
    print(f"#seeds: {seeds}", file=sys.stderr)
    print(f"#seed hits: {hits}", file=sys.stderr)
    return 0


def print_time(summary, wall_s: float, stream=sys.stderr) -> None:
    """The wall-time table by phase and the unit ledger."""
    print(f"time: wall {wall_s:.3f} s", file=stream)
    for phase, seconds in summary.phases.items():
        print(f"time: {phase} {seconds:.3f} s", file=stream)
    print("ledger: ordinal worker device ref_bin query_bin gpu_ms seeds hits raw_hsps hsps",
          file=stream)
    for r in sorted(summary.results, key=lambda r: r.ordinal):
        print(f"ledger: {r.ordinal} {r.worker} {r.device} {r.ref_bin} {r.query_bin} "
              f"{r.gpu_ms:.3f} {r.seeds} {r.hits} {r.raw_hsps} {r.hsps}", file=stream)
