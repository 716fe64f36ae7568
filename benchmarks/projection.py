"""Claim: `hspZ hits-estimate --ns-per-hit` projects a run's GPU time from its exact seed hits
(BENCHMARKS.md, "GPU ns per seed hit", the projection's check).

    python benchmarks/projection.py WORKLOAD --ns-per-hit NS [--unit-ms MS] [--worker-ms MS]
        [-B 125M [-B 50M ...]] [--workdir DIR] [--out DIR]

Runs `hspZ hits-estimate --ns-per-hit NS [--unit-ms MS --worker-ms MS]` and then `hspZ run
--backend gpu --time` on the same pair, for each layout (-B, several reference bins, so several
units), reads the run's unit ledger and
prints, per unit, the estimate's hits and projected ms beside the ledger's hits and GPU ms, the
totals, and how far the projection lands from the measured GPU time (as given, NS taken from an
earlier measurement, and with the run's own mean ns/hit, which leaves only the spread across
units).  On the device: `python3 benchmarks/projection.py M --ns-per-hit 0.1086 --out $OUT`.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.workloads import materialise  # noqa: E402


def hspz(args: list[str]) -> str:
    done = subprocess.run([sys.executable, "-m", "hspz", *args], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"hspZ {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout + done.stderr


def ledger(text: str) -> list[dict]:
    """The `unit ledger:` rows of `--time` output, by column name."""
    rows = [line.split("\t")[1:] for line in text.splitlines() if line.startswith("unit ledger:\t")]
    head, body = rows[0], rows[1:]
    return [dict(zip(head, r, strict=True)) for r in body]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload")
    ap.add_argument("--ns-per-hit", type=float, required=True)
    ap.add_argument("--unit-ms", default="0")
    ap.add_argument("--worker-ms", default="0")
    ap.add_argument(
        "-B", action="append", help="bin size (several bins, several units); repeatable"
    )
    ap.add_argument("--workdir", type=Path, default=Path("bench-data"))
    ap.add_argument("--out", type=Path, default=Path("."))
    ap.add_argument("--backend", default="gpu")
    a = ap.parse_args()
    files = materialise(a.workload, a.workdir)
    for size in a.B or ["125M"]:
        check(a, files, size)
    return 0


def check(a, files: dict, size: str) -> None:
    """One layout: the estimate's projection against the run's ledger, unit by unit."""
    layout = ["-r", str(files["reference"]), "-q", str(files["query"]), "-B", size]
    pricing = [
        "--ns-per-hit",
        str(a.ns_per_hit),
        "--unit-ms",
        a.unit_ms,
        "--worker-ms",
        a.worker_ms,
    ]
    est = hspz(["hits-estimate", *layout, *pricing])
    projected = [
        line.split("\t")
        for line in est.splitlines()
        if line and line[0].isdigit() and line.count("\t") == 5
    ]
    run = hspz(
        [
            "run",
            *layout,
            "--backend",
            a.backend,
            "--time",
            "-o",
            str(a.workdir / f"projection-{a.workload}-{size}"),
        ]
    )
    (a.out / f"projection-{a.workload}-{size}.log").write_text(est + "\n" + run)
    units = ledger(run)
    if len(units) != len(projected):
        raise SystemExit(f"{len(projected)} estimated units, {len(units)} in the ledger")
    print(f"-B {size}\nordinal\test_hits\tledger_hits\tprojected_ms\tledger_gpu_ms")
    total_gpu = total_hits = 0.0
    for k, (row, unit) in enumerate(zip(projected, units, strict=True)):
        hits, gpu = int(unit["hits"]), float(unit["gpu_ms"])
        total_gpu, total_hits = total_gpu + gpu, total_hits + hits
        print(f"{k}\t{row[4]}\t{hits}\t{row[5]}\t{gpu:.3f}")
    same = all(int(r[4]) == int(u["hits"]) for r, u in zip(projected, units, strict=True))
    head = next(line for line in est.splitlines() if line.startswith("hits-estimate: projected"))
    proj = float(re.search(r": ([\d.]+) s of GPU time", head).group(1))
    own = total_gpu / total_hits * 1e6
    print(
        f"projection -B {size}: {len(units)} units, hits equal to the ledger's: {same}; "
        f"{head.split(': ', 1)[1]}; measured GPU time {total_gpu / 1e3:.3f} s "
        f"({own:.4f} ns/hit over all): projected / measured {proj * 1e3 / total_gpu:.3f}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
