"""Claim: a unit's wall follows its bins' sizes and its hits, so a pricing fitted on one or two
layouts projects the others within 10%, unit by unit and in total (BENCHMARKS.md, issue 27
item 3; the model is `hspz.planning.pricing`'s).

    python benchmarks/projection_fit.py [LOG ...] [--tables OLDFIT.log] --fit 50M[,250M]
        [--target wall|gpu]
        [--terms unit_ms,worker_ms,ref_ms_per_mbp,query_ms_per_mbp,ns_per_hit[,...]]
        [--pricing-out FILE] [--json FILE]

Each LOG is the output of one `hspZ run --time` (its `unit ledger:` rows; any backend) or a
ledger TSV (`hspZ merge --ledger`), named
LABEL=PATH or by a file name holding `-B<LABEL>` or `-<LABEL>.`/`-<LABEL>-` (gpu_projection.sh
writes run-B50M-1.log ...): runs sharing a label are one layout's repeats.  The runs of the
--fit labels are fitted together by least squares (`hspz.planning.pricing.fit`); every other run is
then projected from its own ledger's bins and hits (what `hits-estimate` counts, row for row)
and compared with what it measured:

  wall  (default) a unit's step in its worker: from the end of the unit before it (its own
        start for the worker's first unit) to its end, so a reference bin's build and a query
        swap between units count; a run's total is its busiest worker's sum of steps
  gpu   the ledger's gpu_ms (first launch to last event)

It prints, per checked run, each unit's projected and measured ms and their ratio, the totals,
and whether the total and every unit land within 10%; then the hits-estimate flags of the fit
(and --pricing-out writes them as a file for `hits-estimate --pricing`), and the projection of
an hg38 x mm39-sized pair on one GPU (GRCh38 and GRCm39 primary chromosome lengths, rounded;
6.12e12 seed hits spread by bp x bp, as BENCHMARKS.md's whole-genome figure).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hspz.planning import bins as planning  # noqa: E402
from hspz.planning.pricing import FIVE, TERMS, Pricing, features, fit  # noqa: E402

TOLERANCE = 0.10
# GRCh38 / GRCm39 chromosomes 1-22 (1-19), X, Y in Mbp, rounded: the pair's shape, not its bases
HG38_MBP = (
    248.96,
    242.19,
    198.30,
    190.21,
    181.54,
    170.81,
    159.35,
    145.14,
    138.39,
    133.80,
    135.09,
    133.28,
    114.36,
    107.04,
    101.99,
    90.34,
    83.26,
    80.37,
    58.62,
    64.44,
    46.71,
    50.82,
    156.04,
    57.23,
)
MM39_MBP = (
    195.15,
    181.76,
    159.75,
    156.86,
    151.76,
    149.59,
    145.00,
    130.13,
    124.36,
    130.53,
    121.97,
    120.09,
    120.88,
    125.14,
    104.07,
    98.01,
    95.29,
    90.72,
    61.42,
    169.48,
    91.46,
)
GENOME_HITS = 6.12e12


@dataclass
class Run:
    """One run's ledger: its label, file, units (ledger rows as dicts) and process wall."""

    label: str
    path: str
    units: list[dict]
    wall_s: float | None


def label_of(path: str) -> str:
    name = Path(path).name
    m = re.search(r"-B(\w+?)(?:-\d+)?\.log$", name) or re.search(r"-(\w+?)(?:-\d+)?\.log$", name)
    if not m:
        raise SystemExit(f"projection_fit: no layout label in {name!r}: give LABEL=PATH")
    return m.group(1)


def parse_run(spec: str) -> Run:
    """A `hspZ run --time` log as a Run (LABEL=PATH or PATH)."""
    label, eq, path = spec.partition("=")
    if not eq:
        label, path = label_of(spec), spec
    text = Path(path).read_text()
    if text.startswith("job\t"):  # a ledger TSV (`merge --ledger`): its columns after job
        rows = [line.split("\t")[1:] for line in text.splitlines() if line]
    else:
        rows = [
            line.split("\t")[1:] for line in text.splitlines() if line.startswith("unit ledger:\t")
        ]
    if len(rows) < 2:
        raise SystemExit(f"projection_fit: {path}: no unit ledger rows (run with --time)")
    head = rows[0]
    units = []
    for r in rows[1:]:
        d = dict(zip(head, r, strict=True))
        units.append(
            {
                k: float(v) if k.endswith("_ms") else v if k == "device" else int(v)
                for k, v in d.items()
            }
        )
    wall = re.search(r"^time: wall\s+([\d.]+)", text, re.M)
    return Run(label, path, units, float(wall.group(1)) if wall else None)


def parse_tables(path: str) -> list[Run]:
    """The runs whose unit tables an earlier projection_fit.py printed (`== LABEL (PATH): N
    units`, then a row a unit): their bins, hits and measured wall steps.  The host times are
    rebuilt from those steps on one worker, so only `--target wall` reads them as measured."""
    runs: list[Run] = []
    for block in re.split(r"^== ", Path(path).read_text(), flags=re.M)[1:]:
        label = block.split()[0]
        units, end = [], 0.0
        for line in block.splitlines()[2:]:
            cells = line.split("\t")
            if len(cells) != 9 or not cells[0].isdigit():
                break
            step = float(cells[7])
            units.append(
                dict(
                    ordinal=int(cells[0]),
                    worker=0,
                    ref_bin=int(cells[1]),
                    query_bin=int(cells[2]),
                    ref_bp=int(cells[3]),
                    query_bp=int(cells[4]),
                    hits=int(cells[5]),
                    gpu_ms=0.0,
                    host_start_ms=end,
                    host_end_ms=end + step,
                )
            )
            end += step
        runs.append(Run(label, f"{path} ({label})", units, None))
    if not runs:
        raise SystemExit(f"projection_fit: {path}: no unit tables")
    return runs


def worker_order(units: list[dict]) -> list[list[int]]:
    """Each worker's units (indices into `units`) in the order they ran."""
    workers: dict[int, list[int]] = {}
    for i, u in enumerate(units):
        workers.setdefault(u["worker"], []).append(i)
    return [
        sorted(ix, key=lambda i: units[i]["host_start_ms"]) for _, ix in sorted(workers.items())
    ]


def measured(run: Run, target: str) -> np.ndarray:
    """Each unit's measured ms (module docstring: wall steps or gpu_ms)."""
    u = run.units
    if target == "gpu":
        return np.array([x["gpu_ms"] for x in u])
    out = np.zeros(len(u))
    for order in worker_order(u):
        prev = None
        for i in order:
            start = u[i]["host_start_ms"] if prev is None else u[prev]["host_end_ms"]
            out[i] = u[i]["host_end_ms"] - start
            prev = i
    return out


def run_features(run: Run) -> np.ndarray:
    u = run.units
    return features(
        [x["ref_bp"] for x in u],
        [x["query_bp"] for x in u],
        [x["hits"] for x in u],
        [x["ref_bin"] for x in u],
        worker_order(u),
    )


def busiest(run: Run, per_unit: np.ndarray) -> float:
    return max(sum(per_unit[i] for i in order) for order in worker_order(run.units))


def check(run: Run, pricing: Pricing, target: str) -> dict:
    """Projected against measured, unit by unit and in total, for one run."""
    proj, meas = pricing.cost(run_features(run)), measured(run, target)
    ratios = proj / np.maximum(meas, 1e-9)
    total_p, total_m = busiest(run, proj), busiest(run, meas)
    return {
        "label": run.label,
        "path": run.path,
        "units": len(run.units),
        "projected_ms": [round(float(x), 1) for x in proj],
        "measured_ms": [round(float(x), 1) for x in meas],
        "total_projected_ms": round(float(total_p), 1),
        "total_measured_ms": round(float(total_m), 1),
        "total_ratio": round(float(total_p / total_m), 4),
        "worst_unit_ratio": round(float(ratios[np.argmax(np.abs(ratios - 1))]), 4),
        "total_within": bool(abs(total_p / total_m - 1) <= TOLERANCE),
        "units_within": bool((np.abs(ratios - 1) <= TOLERANCE).all()),
        "process_wall_s": run.wall_s,
    }


def report_lines(run: Run, res: dict) -> list[str]:
    lines = [
        f"== {run.label} ({run.path}): {res['units']} units",
        "ordinal\tref_bin\tquery_bin\tref_bp\tquery_bp\thits\tprojected_ms\tmeasured_ms\tratio",
    ]
    for u, p, m in zip(run.units, res["projected_ms"], res["measured_ms"], strict=True):
        lines.append(
            f"{u['ordinal']}\t{u['ref_bin']}\t{u['query_bin']}\t{u['ref_bp']}\t"
            f"{u['query_bp']}\t{u['hits']}\t{p:.1f}\t{m:.1f}\t{p / max(m, 1e-9):.3f}"
        )
    lines.append(
        f"total {run.label}: projected {res['total_projected_ms'] / 1e3:.3f} s, "
        f"measured {res['total_measured_ms'] / 1e3:.3f} s, ratio "
        f"{res['total_ratio']:.3f} (within 10%: {res['total_within']}); worst unit "
        f"{res['worst_unit_ratio']:.3f} (every unit within 10%: {res['units_within']})"
        + (f"; process wall {run.wall_s:.3f} s" if run.wall_s else "")
    )
    return lines


def estimate_line(run: Run, path: str, pricing: Pricing, target: str) -> str:
    """hits-estimate's priced rows against the run's ledger: the same hits, the same projection
    as the fit's from the ledger, and the estimate's total against the measured one."""
    rows = [
        line.split("\t")
        for line in Path(path).read_text().splitlines()
        if line and line[0].isdigit()
    ]
    est = {(int(r[0]), int(r[1])): (int(r[4]), float(r[5])) for r in rows if len(r) == 6}
    proj, meas = pricing.cost(run_features(run)), measured(run, target)
    keys = [(u["ref_bin"], u["query_bin"]) for u in run.units]
    if sorted(est) != sorted(keys):
        return f"estimate {run.label}: {len(est)} priced rows, {len(keys)} ledger units: differ"
    same_hits = all(est[k][0] == u["hits"] for k, u in zip(keys, run.units, strict=True))
    diff = max(abs(est[k][1] - p) for k, p in zip(keys, proj, strict=True))
    total = sum(est[k][1] for k in keys)
    return (
        f"estimate {run.label}: {len(keys)} units, hits equal to the ledger's: {same_hits}; "
        f"priced as the fit prices the ledger: {diff < 0.01} (largest difference "
        f"{diff:.3f} ms); projected {total / 1e3:.3f} s against {busiest(run, meas) / 1e3:.3f} "
        f"s measured ({total / busiest(run, meas):.3f})"
    )


def flags_of(p: Pricing) -> str:
    return " ".join(
        f"--{t.replace('_', '-')} {getattr(p, t):.6g}"
        for t in ("ns_per_hit", *TERMS[:4], *TERMS[5:])
        if t == "ns_per_hit" or getattr(p, t)
    )


def genome_projection(pricing: Pricing, block: int = planning.DEFAULT_BLOCK) -> list[str]:
    """The hg38 x mm39-sized pair on one GPU at the default layout, through hits-estimate's
    own pricing (`priced`), hits spread over the units by bp x bp."""
    from hspz.commands.estimate import priced, projection_lines

    ref = [int(x * 1e6) for x in HG38_MBP]
    qry = [int(x * 1e6) for x in MM39_MBP]
    p = planning.make_plan(ref, qry, block, block)
    rbp, qbp = planning.bin_bp(p.ref_bins, ref), planning.bin_bp(p.query_bins, qry)
    density = GENOME_HITS / (sum(ref) * sum(qry))
    rows = [
        (r, q, rbp[r], qbp[q], int(rbp[r] * qbp[q] * density))
        for r in range(len(rbp))
        for q in range(len(qbp))
    ]
    sched, costs = priced(p, rows, pricing, 1)
    lines = [
        f"hg38 x mm39-sized ({sum(ref) / 1e9:.2f} x {sum(qry) / 1e9:.2f} Gbp, "
        f"{GENOME_HITS:.3g} hits, -B {block // 10**6}M: {len(rbp)} x {len(qbp)} bins):"
    ]
    lines += projection_lines(sched, len(qbp), rows, costs, pricing, 1)
    hit_share = sum(r[4] for r in rows) * pricing.ns_per_hit / 1e6 / sum(costs)
    lines.append(
        f"hg38 x mm39-sized: {sum(costs) / 1e3:.1f} s on one GPU, "
        f"{hit_share:.1%} of it the per-hit term"
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="*")
    ap.add_argument(
        "--tables",
        action="append",
        default=[],
        metavar="LOG",
        help="the unit tables an earlier projection_fit.py printed, as runs (wall steps)",
    )
    ap.add_argument("--fit", required=True, help="layout labels to fit on, comma-separated")
    ap.add_argument("--target", choices=("wall", "gpu"), default="wall")
    ap.add_argument(
        "--terms",
        default=",".join(FIVE),
        help="the fitted terms (default the "
        "first five of hspz.planning.pricing.TERMS; the others are 0)",
    )
    ap.add_argument("--pricing-out")
    ap.add_argument("--json")
    ap.add_argument(
        "--estimate",
        action="append",
        default=[],
        metavar="LABEL=FILE",
        help="hits-estimate's rows (stdout, priced) for layout LABEL, compared "
        "with that layout's first run",
    )
    a = ap.parse_args(argv)
    runs = [parse_run(s) for s in a.logs] + [r for t in a.tables for r in parse_tables(t)]
    if not runs:
        raise SystemExit("projection_fit: no runs (give logs or --tables)")
    fitted = set(a.fit.split(","))
    terms = a.terms.split(",")
    unknown = [t for t in terms if t not in TERMS] + [
        f for f in fitted if f not in {r.label for r in runs}
    ]
    if unknown:
        raise SystemExit(f"projection_fit: unknown term or label {unknown[0]!r}")
    on = [r for r in runs if r.label in fitted]
    feats = np.vstack([run_features(r) for r in on])
    y = np.concatenate([measured(r, a.target) for r in on])
    try:
        pricing = fit(feats, y, terms)
    except ValueError as exc:
        raise SystemExit(f"projection_fit: {exc} (fit on more layouts or fewer --terms)") from None
    print(
        f"fit on {','.join(sorted(fitted))} ({len(on)} runs, {len(y)} units, target "
        f"{a.target}): {pricing.label()}"
    )
    results = []
    for run in runs:
        res = check(run, pricing, a.target)
        res["fitted_on"] = run.label in fitted
        results.append(res)
        print("\n".join(report_lines(run, res)))
    held = [r for r in results if not r["fitted_on"]]
    labels = sorted({r["label"] for r in held})
    good = [
        lab
        for lab in labels
        if all(r["total_within"] and r["units_within"] for r in held if r["label"] == lab)
    ]
    print(
        f"summary ({a.target}): fitted on {','.join(sorted(fitted))}; {len(good)} of "
        f"{len(labels)} held-out layouts within 10% in total and unit by unit in every run "
        f"({','.join(good) or 'none'}); total ratios "
        + ", ".join(f"{r['label']} {r['total_ratio']:.3f}" for r in held)
    )
    print(f"hits-estimate flags: {flags_of(pricing)}")
    for spec in a.estimate:
        label, _, path = spec.partition("=")
        run = next((r for r in runs if r.label == label), None)
        if run is None:
            raise SystemExit(f"projection_fit: --estimate {label}: no run of that layout")
        print(estimate_line(run, path, pricing, a.target))
    print("\n".join(genome_projection(pricing)))
    if a.pricing_out:
        Path(a.pricing_out).write_text(pricing.to_json())
    if a.json:
        with open(a.json, "a") as fh:
            fh.write(
                json.dumps(
                    {
                        "fit": sorted(fitted),
                        "target": a.target,
                        "pricing": asdict(pricing),
                        "runs": results,
                    }
                )
                + "\n"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
