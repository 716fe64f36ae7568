"""Where a CPU run's time outside the engine goes (issue 24): one `hspZ run --time` per round
and thread count, its process timeline stamped from outside the package.

    python3 benchmarks/fixed_cost.py [--pair mammal30x6] [--threads 1,16] [--repeat 3]
        [--workdir /tmp/bench]

Each run goes through a small wrapper that stamps, in seconds after the parent's fork: the
interpreter's start, `drive`'s entry (imports and argument parsing done), the unit's first
seed batch (the ledger's host start), the engine's end, `os._exit`, and the parent's
`wait`.  Before it, the bare interpreter, numpy's and numba's imports are timed alone, each
in a fresh process.  One table per thread count, each row a median over the rounds.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WRAPPER = r"""
import os, sys, time, runpy
t0 = float(os.environ["FC_T0"])
def stamp(what):
    os.write(2, f"@@ {what} {time.time() - t0:.4f}\n".encode())
stamp("interpreter")
import hspz.run.driver as driver
import hspz.commands.run as run
inner = driver.drive
def drive(*a, **k):
    stamp("drive")
    return inner(*a, **k)
driver.drive = run.drive = drive
bare_exit = os._exit
def leave(code):
    stamp("exit")
    bare_exit(code)
os._exit = leave
sys.argv = ["hspz", *sys.argv[1:]]
runpy.run_module("hspz", run_name="__main__")
"""


def fresh(code: str) -> float:
    """Seconds a fresh interpreter takes to run `code` and exit."""
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    return time.perf_counter() - t


def one_run(ref: str, qry: str, threads: int, out: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FC_T0": repr(time.time())}
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", WRAPPER, "run", "-r", ref, "-q", qry, "-o", str(out)]
        + ["--backend", "cpu", "-t", str(threads), "--time"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    wall = time.perf_counter() - t
    if proc.returncode:
        raise SystemExit(f"fixed_cost.py: hspZ failed:\n{proc.stdout[-2000:]}")
    text = proc.stdout
    got = {k: float(v) for k, v in re.findall(r"^@@ (\w+) ([\d.]+)$", text, re.M)}
    phases = dict(re.findall(r"^time: (input|plan|workers|wall) +([\d.]+)", text, re.M))
    row = re.search(r"^unit ledger:\t0\t.*$", text, re.M)
    assert row is not None, text[-2000:]
    cells = row.group(0).split("\t")
    engine_ms, start_ms, end_ms = float(cells[8]), float(cells[9]), float(cells[10])
    table = re.search(r"^time: engine: table +([\d.]+)", text, re.M)
    drive = got["drive"]
    return {
        "interpreter": got["interpreter"],
        "imports+args": drive - got["interpreter"],
        "input": float(phases["input"]),
        "plan": float(phases["plan"]),
        "to first unit": start_ms / 1e3 - float(phases["input"]) - float(phases["plan"]),
        "table": float(table.group(1)) if table else 0.0,
        "engine": engine_ms / 1e3,
        "after engine": got["exit"] - drive - end_ms / 1e3,
        "exit to wait": wall - got["exit"],
        "outside engine": wall - engine_ms / 1e3,
        "wall": wall,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pair", default="mammal30x6")
    p.add_argument("--threads", default="1,16")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workdir", default="/tmp/bench")
    a = p.parse_args()
    paths = subprocess.run(
        [sys.executable, "benchmarks/workloads.py", a.pair, "--workdir", a.workdir],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    files = dict(line.split("\t") for line in paths.strip().splitlines())
    ref, qry = files["reference"], files["query"]
    for label, code in (
        ("python -c pass", "pass"),
        ("import numpy", "import numpy"),
        ("import numba", "import numba"),
        ("import hspz.commands.run", "import hspz.commands.run"),
    ):
        print(f"{label}: {statistics.median(fresh(code) for _ in range(3)):.3f} s (median of 3)")
    threads = [int(t) for t in a.threads.split(",")]
    runs: dict[int, list[dict[str, float]]] = {t: [] for t in threads}
    with tempfile.TemporaryDirectory(prefix="fixed-cost-") as tmp:
        for r in range(a.repeat):
            for t in threads:
                runs[t].append(one_run(ref, qry, t, Path(tmp) / f"r{r}t{t}"))
                print(
                    f"round {r + 1} -t {t}: "
                    + ", ".join(f"{k} {v:.3f}" for k, v in runs[t][-1].items()),
                    flush=True,
                )
    for t in threads:
        print(f"\n-t {t}, seconds, median of {a.repeat} (all runs)")
        for key in runs[t][0]:
            vals = [x[key] for x in runs[t]]
            each = " ".join(f"{v:.3f}" for v in vals)
            print(f"  {key:15s} {statistics.median(vals):7.3f}  ({each})")


if __name__ == "__main__":
    main()
