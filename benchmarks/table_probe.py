"""Issue 24: where the CPU backend's seed table phase spends its wall at many threads.

Each run is a fresh `hspZ run --backend cpu -t N` process, stopped after its first reference
bin's table (the "table" phase of `--time`), with every step of the table's build stamped from
outside the package: the seed codes, each thread's `_share_counts`, `_share_scatter` and
`_range_sort`, and the gaps between them. Then the same table is built again in the same
process (warm: numba's loops loaded, pages mapped once) and stamped the same way.

    python3 benchmarks/table_probe.py REF QUERY [--threads 16] [--rounds 3]

Prints, per run, each step's first start and last end (seconds from the table's start), its
calls and the sum of their seconds; and, in seconds from the probed process's first line, when
numba's load (`jit._load_locked`), the preload thread (`engine.cpu.preload`), the reads
(`read_both`) and the table started and ended.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("seed_codes", "_share_counts", "_share_scatter", "_range_sort", "build_seed_table")


def _stamped(name: str, fn, log: list):
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            log.append((name, threading.get_ident(), t0, time.perf_counter()))

    return wrapper


def _summary(log: list, t0: float, t1: float) -> dict:
    out: dict = {"wall": round(t1 - t0, 4)}
    for name in STEPS:
        rows = [r for r in log if r[0] == name]
        if rows:
            out[name] = {
                "start": round(min(r[2] for r in rows) - t0, 4),
                "end": round(max(r[3] for r in rows) - t0, 4),
                "calls": len(rows),
                "sum": round(sum(r[3] - r[2] for r in rows), 4),
            }
    return out


def child(argv: list[str]) -> None:
    """Inside the probed process: stamp the table's steps, run hspZ, stop after the table."""
    born = time.perf_counter()
    sys.path.insert(0, os.environ.get("PROBE_PACKAGE", str(ROOT)))
    from hspz.commands import run as run_command
    from hspz.core import jit
    from hspz.engine import contract, cpu
    from hspz.stages import seed

    marks: list = []
    jit._load_locked = _stamped("numba load", jit._load_locked, marks)
    cpu.preload = _stamped("preload", cpu.preload, marks)
    run_command.read_both = _stamped("read_both", run_command.read_both, marks)
    log: list = []
    contract.seed_codes = _stamped("seed_codes", contract.seed_codes, log)
    contract.build_seed_table = _stamped("build_seed_table", contract.build_seed_table, log)
    for name in ("_share_counts", "_share_scatter", "_range_sort"):
        setattr(seed, name, _stamped(name, getattr(seed, name), log))
    original = contract.RefBin.build_table

    def build_table(self, threads: int = 1):
        runs = []
        for _ in range(2):  # the run's own build, then a warm one
            log.clear()
            self._table = None
            t0 = time.perf_counter()
            original(self, threads)
            runs.append(_summary(log, t0, time.perf_counter()))
            marks.append(("table", 0, t0, time.perf_counter()))
        spans = {m[0]: [round(m[2] - born, 3), round(m[3] - born, 3)] for m in reversed(marks)}
        print("PROBE " + json.dumps([*runs, spans]), flush=True)
        os._exit(0)

    contract.RefBin.build_table = build_table
    from hspz.cli import main

    sys.exit(main(argv))


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("reference")
    p.add_argument("query")
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    for r in range(a.rounds):
        with tempfile.TemporaryDirectory(prefix="table_probe.") as out:
            argv = ["run", "-r", a.reference, "-q", a.query, "-o", f"{out}/o"]
            argv += ["--backend", "cpu", "-t", str(a.threads)]
            t = time.perf_counter()
            done = subprocess.run(
                [sys.executable, __file__, "--child", *argv],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("PROBE ")]
        if not lines:
            print(done.stdout[-2000:])
            return 1
        first, warm, spans = json.loads(lines[0][6:])
        print(f"round {r} (process {time.perf_counter() - t:.2f} s), -t {a.threads}")
        print("  from the first line: " + "  ".join(f"{k} {v[0]}-{v[1]}" for k, v in spans.items()))
        for label, s in (("first", first), ("warm", warm)):
            steps = "  ".join(
                f"{k} {v['start']:.3f}-{v['end']:.3f} ({v['calls']} calls, {v['sum']:.3f} s)"
                for k, v in s.items()
                if k != "wall"
            )
            print(f"  {label}: wall {s['wall']:.3f} s  {steps}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
