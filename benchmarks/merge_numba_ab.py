"""`hspZ merge` with numba loaded as it starts (results of at least `merge.NUMBA_BYTES`) against
the same merge on numpy's paths (the threshold raised out of reach), each a fresh process (numba
is loaded once a process), alternating, each into a fresh OUT; outputs and ledgers checked
identical:

    python benchmarks/merge_numba_ab.py --plan PLAN --out DIR [--runs 5] RESULT...

Prints each arm's wall seconds (the process, from outside) and CPU seconds (user + sys of the
child), medians and every run.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.merge_threads import same  # noqa: E402

CHILD = """
import sys
from hspz.commands import merge
from hspz.cli import main
if sys.argv[1] == "numpy":
    merge.NUMBA_BYTES = 1 << 62
sys.exit(main(sys.argv[2:]))
"""


def merge(arm: str, plan: str, out: Path, results: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one merge process into a fresh `out`."""
    shutil.rmtree(out, ignore_errors=True)
    argv = ["merge", "--plan", plan, "-o", str(out), "--ledger", f"{out}.tsv", *results]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, arm, *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if done.returncode:
        sys.exit(f"merge ({arm}) failed: {done.stderr.strip()}")
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, cpu


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--plan", required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("results", nargs="+")
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    arms = {"numba": a.out / "numba", "numpy": a.out / "numpy"}
    got: dict[str, list[tuple[float, float]]] = {arm: [] for arm in arms}
    for _ in range(a.runs):
        for arm, out in arms.items():
            got[arm].append(merge(arm, a.plan, out, a.results))
        assert same(arms["numba"], arms["numpy"]), "outputs differ"
        assert filecmp.cmp(f"{arms['numba']}.tsv", f"{arms['numpy']}.tsv", shallow=False)
    for arm, runs in got.items():
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        print(
            f"merge, {arm}: wall median {statistics.median(walls):.3f} s "
            f"({' '.join(f'{w:.3f}' for w in walls)}), CPU median {statistics.median(cpus):.3f} s "
            f"({' '.join(f'{c:.3f}' for c in cpus)})"
        )


if __name__ == "__main__":
    main()
