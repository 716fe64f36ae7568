"""`hspZ merge` of a query list staged on one thread against on several (`hspz.run.replay`), in one
process, alternating, each into a fresh OUT; outputs and ledgers checked identical:

    python benchmarks/merge_threads.py --plan PLAN --out DIR [--threads 0] [--runs 3]
        [--fsync-ms 0] RESULT...

--fsync-ms adds a sleep to every fsync (which, like a real flush, releases the GIL): a disk whose
flushes cost what a cloud VM's do, on a machine whose own are fast.
"""

from __future__ import annotations

import argparse
import contextlib
import filecmp
import io
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def slow_fsync(ms: float) -> None:
    real = os.fsync

    def fsync(fd: int) -> None:
        real(fd)
        time.sleep(ms / 1000)

    os.fsync = fsync


def merge(plan: str, out: Path, results: list[str], threads: int) -> float:
    from hspz.commands.merge import merge_command

    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        merge_command(plan, str(out), None, False, results, ledger=f"{out}.tsv", threads=threads)
    return time.perf_counter() - t


def same(a: Path, b: Path) -> bool:
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.diff_files or cmp.funny_files:
        return False
    return all(same(a / d, b / d) for d in cmp.common_dirs)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--plan", required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--threads", type=int, default=0, help="0: replay_threads's choice")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--fsync-ms", type=float, default=0)
    p.add_argument("results", nargs="+")
    a = p.parse_args()
    if a.fsync_ms:
        slow_fsync(a.fsync_ms)
    a.out.mkdir(parents=True, exist_ok=True)
    arms = {1: a.out / "one", a.threads: a.out / "many"}
    walls: dict[int, list[float]] = {t: [] for t in arms}
    for _ in range(a.runs):
        for t, out in arms.items():
            walls[t].append(merge(a.plan, out, a.results, t))
        one, many = arms[1], arms[a.threads]
        assert same(one, many), "outputs differ"
        assert filecmp.cmp(f"{one}.tsv", f"{many}.tsv", shallow=False), "ledgers differ"
    for t, w in walls.items():
        print(
            f"fsync +{a.fsync_ms:g} ms, threads={t or 'auto'}: median {statistics.median(w):.3f} s"
            f" ({', '.join(f'{x:.3f}' for x in w)})"
        )


if __name__ == "__main__":
    main()
