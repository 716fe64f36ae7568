"""Interleaved A/B timing of the CPU backend: hspZ from other checkouts, this one and LASTZ.

    python benchmarks/cpu_ab.py hpylori --repeat 3 [--base /tmp/cpu-base] [--threads 1]

On a shared machine the runs of one arm back to back see different loads, so the arms take
turns: round 1 runs every arm once, then round 2, and so on.  Each run is a separate process;
the table gives the median wall time and the median CPU time (user + system of the process,
which the other tenants of the machine disturb less) per arm, and the load averages before and
after.  Every hspZ arm must print the same digest.  `--base DIR` (repeatable) adds an arm that
runs hspZ from the checkout DIR (PYTHONPATH=DIR): `git worktree add DIR <commit>`, or
`git archive <commit> | tar -x -C DIR`; run it once first so its numba cache is warm.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.run import counts, lastz_cmd, plain_fasta  # noqa: E402
from benchmarks.workloads import materialise  # noqa: E402


def timed_cpu(cmd: list[str], env: dict) -> tuple[float, int, str, float]:
    """(wall s, peak RSS KiB, output, CPU s) of one command."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**os.environ, **env})
    out = proc.stdout.read()
    proc.stdout.close()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"failed: {' '.join(cmd)}\n{out.decode()[-2000:]}")
    return wall, usage.ru_maxrss, out.decode(errors="replace"), usage.ru_utime + usage.ru_stime


def hspz_cmd(ref: Path, qry: Path, out: Path, threads: int) -> list[str]:
    return [sys.executable, "-m", "hspz", "run", "-r", str(ref), "-q", str(qry), "-o", str(out),
            "--backend", "cpu", "-t", str(threads), "--time"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--base", action="append", default=[], help="another checkout to time")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--workdir", default=str(ROOT / "bench-data"))
    ap.add_argument("--no-lastz", action="store_true")
    a = ap.parse_args()
    work = Path(a.workdir)
    work.mkdir(parents=True, exist_ok=True)
    files = materialise(a.workload, work)
    ref, qry = Path(files["reference"]), Path(files["query"])
    tmp = Path(tempfile.mkdtemp(prefix="hspz-ab-"))
    arms = {}
    for i, base in enumerate([*a.base, str(ROOT)]):
        name = f"hspZ cpu -t {a.threads} ({Path(base).name})"
        arms[name] = (hspz_cmd(ref, qry, tmp / f"o{i}", a.threads), {"PYTHONPATH": base})
    if not a.no_lastz:
        arms["lastz --nogapped"] = (lastz_cmd(plain_fasta(ref, work), plain_fasta(qry, work)), {})
    for cmd, env in arms.values():  # warm the numba caches and the page cache
        timed_cpu(cmd, env)
    load = [os.getloadavg()[0]]
    runs: dict[str, list] = {name: [] for name in arms}
    for _ in range(a.repeat):
        for name, (cmd, env) in arms.items():
            runs[name].append(timed_cpu(cmd, env))
    load.append(os.getloadavg()[0])
    digests = {counts(r[-1][2])["digest"] for n, r in runs.items() if n.startswith("hspZ")}
    if len(digests) != 1:
        raise SystemExit(f"hspZ arms disagree: {digests}")
    print(f"workload {a.workload}: {a.repeat} rounds, {os.cpu_count()} cores, load average "
          f"{load[0]:.2f} before, {load[1]:.2f} after; digest {digests.pop()}")
    print("| arm | wall s (median) | walls | CPU s (median) | CPU s |")
    print("|---|---|---|---|---|")
    for name, rs in runs.items():
        walls, cpus = [r[0] for r in rs], [r[3] for r in rs]
        print(f"| {name} | {statistics.median(walls):.2f} | {' '.join(f'{w:.2f}' for w in walls)}"
              f" | {statistics.median(cpus):.2f} | {' '.join(f'{c:.2f}' for c in cpus)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
