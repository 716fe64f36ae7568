"""Issue 24's 16-thread loss against the seed batch's size: `hspZ run --backend cpu` at several
`-C` (bases per seed batch; each changes the bytes, so this is a probe, not a setting),
interleaved, each run a fresh process with `--time`:

    python3 benchmarks/chunk_probe.py REF QUERY [--sizes 250000,62500] [--threads 16]
        [--rounds 5]

Prints per run and per size (medians): the process wall, the engine, and the first pass's CPU
seconds summed over the threads (`time: engine: first pass`), with each size's digest.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.run import counts  # noqa: E402  (the runner's parse of a run's output)


def one(ref: str, qry: str, size: str, threads: int) -> dict:
    out = tempfile.mkdtemp(prefix="chunk_probe.")
    try:
        t = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "hspz", "run", "-r", ref, "-q", qry, "-o", f"{out}/o"]
            + ["-C", size, "--backend", "cpu", "-t", str(threads), "--time"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        wall = time.perf_counter() - t
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if done.returncode:
        raise SystemExit(done.stdout[-2000:])
    got = counts(done.stdout)
    first = got["engine_phases"]["first pass"]["cpu"]
    return dict(wall=wall, engine=got["engine_s"], first=first, digest=got["digest"])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("reference")
    p.add_argument("query")
    p.add_argument("--sizes", default="250000,62500")
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args()
    sizes = a.sizes.split(",")
    for size in sizes:  # untimed: numba's cache and the page cache
        one(a.reference, a.query, size, a.threads)
    got: dict[str, list[dict]] = {s: [] for s in sizes}
    for r in range(a.rounds):
        for size in sizes:
            row = one(a.reference, a.query, size, a.threads)
            got[size].append(row)
            print(
                f"round {r + 1} -C {size}: wall {row['wall']:.3f} s, engine "
                f"{row['engine']:.3f} s, first pass CPU {row['first']:.2f} s",
                flush=True,
            )
    for size, rows in got.items():
        med = {k: statistics.median(r[k] for r in rows) for k in ("wall", "engine", "first")}
        walls = " ".join(f"{r['wall']:.3f}" for r in rows)
        print(
            f"-C {size} -t {a.threads}: wall {med['wall']:.3f} s ({walls}), engine "
            f"{med['engine']:.3f} s, first pass CPU {med['first']:.2f} s, digest "
            f"{sorted({r['digest'] for r in rows})}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
