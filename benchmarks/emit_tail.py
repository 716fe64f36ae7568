"""What the emitter costs per unit and after the last one, on synthetic units shaped like the
simulated 1000 x 500 Mbp pair's (4 reference bins x 2 query bins, 50 segments files a unit,
about 1.1 M HSPs a unit), added in plan order.  Staging formats and writes a unit's files and
sorts their lines for the digest (and merges a reference bin's lines once its units are in);
`finish` merges what is left, hashes and renames the files.  The tail after the last unit is
its staging plus `finish`.  CPU only.

    python benchmarks/emit_tail.py [--units 8] [--hsps 1100000] [--files 50] [--runs 3]
        [--workers 1]

`--workers W` has the units arrive as from W workers of a unit partition, each with a
contiguous share, one unit of each in turn (the last worker's first), as `hspZ run --gpus W`
stages them.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import numpy as np

from hspz import jit
from hspz.emit import Emitter
from hspz.engine import UnitResult
from hspz.hsp import HSP_DTYPE
from hspz.inputs import table_from
from hspz.plan import WorkUnit


def units(n_units: int, hsps: int, files: int, rng) -> list[UnitResult]:
    out = []
    for u in range(n_units):
        r = UnitResult(u, u // 2, u % 2)
        for f in range(files):
            h = np.zeros(hsps // files, HSP_DTYPE)
            h["ref_start"] = np.sort(rng.integers(0, 2.4e8, len(h)))
            h["query_start"] = rng.integers(0, 2.4e8, len(h))
            h["len"] = rng.integers(20, 400, len(h))
            h["score"] = rng.integers(3000, 30000, len(h))
            r.segments.append((f // 2 + 1, "plus" if f % 2 == 0 else "minus", h))
        out.append(r)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--units", type=int, default=8)
    ap.add_argument("--hsps", type=int, default=1_100_000)
    ap.add_argument("--files", type=int, default=50)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=1)
    a = ap.parse_args()
    jit.load()
    made = units(a.units, a.hsps, a.files, np.random.default_rng(7))
    shares = [made[k * a.units // a.workers:(k + 1) * a.units // a.workers]
              for k in reversed(range(a.workers))]
    results = [r for turn in zip(*shares, strict=True) for r in turn]
    names = {side: [f"{side[0]}chr{i}" for i in range(8)] for side in ("reference", "query")}

    def tables(side: str, b: int, strand: str):
        return table_from(names[side][2 * b: 2 * b + 2], [250_000_000] * 2, "", strand)

    stage, last, final = [], [], []
    for _ in range(a.runs):
        with tempfile.TemporaryDirectory() as out:
            e = Emitter([WorkUnit(r.ordinal, r.ref_bin, r.query_bin) for r in results], tables,
                        f"{out}/o")
            t = time.perf_counter()
            for r in results[:-1]:
                e.add(r)
            t1 = time.perf_counter()
            e.add(results[-1])
            t2 = time.perf_counter()
            digest = e.finish()
            stage.append((t1 - t) / (len(results) - 1))
            last.append(t2 - t1)
            final.append(time.perf_counter() - t2)
    med = statistics.median
    print(f"staging per unit before the last {med(stage):.3f} s, the last {med(last):.3f} s, "
          f"finish {med(final):.3f} s, tail {med(x + y for x, y in zip(last, final, strict=True)):.3f} s "
          f"(medians of {a.runs}; {a.units} units x {a.hsps} HSPs in {a.files} files; digest "
          f"{digest})")


if __name__ == "__main__":
    main()
