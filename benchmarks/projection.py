"""Claim: `hspZ hits-estimate --ns-per-hit` projects a run's GPU time from its exact seed hits
(BENCHMARKS.md, "GPU ns per seed hit", the projection's check).

    python benchmarks/projection.py WORKLOAD --ns-per-hit NS [-B 25M] [--workdir DIR] [--out DIR]

Runs `hspZ hits-estimate --ns-per-hit NS` and then `hspZ run --backend gpu --time` on the same
pair and layout (several reference bins, so several units), reads the run's unit ledger and
prints, per unit, the estimate's hits and projected ms beside the ledger's hits and GPU ms, the
totals, and how far the projection lands from the measured GPU time (as given, NS taken from an
earlier measurement, and with the run's own mean ns/hit, which leaves only the spread across
units).  On the device: `python3 benchmarks/projection.py M --ns-per-hit 0.1086 --out $OUT`.
"""

from __future__ import annotations

import argparse
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
    rows = [line.split("\t")[1:] for line in text.splitlines()
            if line.startswith("unit ledger:\t")]
    head, body = rows[0], rows[1:]
    return [dict(zip(head, r, strict=True)) for r in body]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload")
    ap.add_argument("--ns-per-hit", type=float, required=True)
    ap.add_argument("-B", default="25M", help="reference bin size (several bins, several units)")
    ap.add_argument("--workdir", type=Path, default=Path("bench-data"))
    ap.add_argument("--out", type=Path, default=Path("."))
    ap.add_argument("--backend", default="gpu")
    a = ap.parse_args()
    files = materialise(a.workload, a.workdir)
    ref, qry = files["reference"], files["query"]
    layout = ["-r", str(ref), "-q", str(qry), "-B", a.B]
    est = hspz(["hits-estimate", *layout, "--ns-per-hit", str(a.ns_per_hit)])
    projected = [line.split("\t") for line in est.splitlines()
                 if line and line[0].isdigit() and line.count("\t") == 5]
    run = hspz(["run", *layout, "--backend", a.backend, "--time", "-o",
                str(a.workdir / f"projection-{a.workload}")])
    (a.out / f"projection-{a.workload}.log").write_text(est + "\n" + run)
    units = ledger(run)
    if len(units) != len(projected):
        raise SystemExit(f"{len(projected)} estimated units, {len(units)} in the ledger")
    print("ordinal\test_hits\tledger_hits\tprojected_ms\tledger_gpu_ms")
    total_gpu = total_hits = 0.0
    for k, (row, unit) in enumerate(zip(projected, units, strict=True)):
        hits, gpu = int(unit["hits"]), float(unit["gpu_ms"])
        total_gpu, total_hits = total_gpu + gpu, total_hits + hits
        print(f"{k}\t{row[4]}\t{hits}\t{row[5]}\t{gpu:.3f}")
    same = all(int(r[4]) == int(u["hits"]) for r, u in zip(projected, units, strict=True))
    proj = sum(float(r[5]) for r in projected)
    own = total_gpu / total_hits * 1e6
    spread = max(abs(int(r[4]) * own / 1e6 - float(u["gpu_ms"])) / float(u["gpu_ms"])
                 for r, u in zip(projected, units, strict=True))
    print(f"projection: {len(units)} units, hits equal to the ledger's: {same}; projected "
          f"{proj / 1e3:.3f} s at {a.ns_per_hit:g} ns/hit, measured GPU time "
          f"{total_gpu / 1e3:.3f} s ({own:.4f} ns/hit): projected / measured "
          f"{proj / total_gpu:.3f}; at the run's own {own:.4f} ns/hit the worst unit is off by "
          f"{spread * 100:.1f}%")
    for line in est.splitlines():
        if line.startswith("hits-estimate: at --gpus"):
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
