"""Issue 25's overhead: is the workflow's `hspZ index` slower than the one-process arm's?  The
same index built from the same reference by each arm's command line, and by the two halfway
forms, each from a fresh folder, interleaved:

    python3 benchmarks/index_forms.py --reference REF [--rounds 3] [--workdir /tmp/forms]

workflow   hspZ index --reference=REF --index=DIR --seq-block-size=500M --backend=gpu
           --threads=N --time        (workflow/rules/index.smk; N the machine's cores)
one        hspZ index -r REF --index DIR -B 500M --backend gpu --threads 0
           (benchmarks/workflow_overhead.py's one-process arm)
one+time   `one` with --time
one+N      `one` with --threads N

Prints each form's walls and median, and the index files' digests (every form must write the
same index).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def forms(ref: str, dest: Path, block: str, backend: str) -> dict[str, list[str]]:
    cores = str(os.cpu_count() or 1)
    one = ["-r", ref, "--index", str(dest), "-B", block, "--backend", backend, "--threads", "0"]
    return {
        "workflow": [
            f"--reference={ref}",
            f"--index={dest}",
            f"--seq-block-size={block}",
            f"--backend={backend}",
            f"--threads={cores}",
            "--time",
        ],
        "one": one,
        "one+time": [*one, "--time"],
        "one+N": [*one[:-1], cores],
    }


def digest(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file() and p.name != "MANIFEST":
            h.update(p.name.encode())
            h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()[:16]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reference", required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("-B", default="500M")
    p.add_argument("--backend", default="gpu")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/forms"))
    a = p.parse_args()
    walls: dict[str, list[float]] = {}
    digests: dict[str, set[str]] = {}
    for r in range(a.rounds):
        for name, args in forms(a.reference, a.workdir / "ix", a.B, a.backend).items():
            shutil.rmtree(a.workdir, ignore_errors=True)
            a.workdir.mkdir(parents=True)
            t = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "hspz", "index", *args],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            wall = time.perf_counter() - t
            if done.returncode:
                print(done.stderr[-2000:], file=sys.stderr)
                return 1
            walls.setdefault(name, []).append(wall)
            if r == 0:
                digests.setdefault(name, set()).add(digest(a.workdir / "ix"))
            print(f"round {r + 1} {name}: {wall:.3f} s", flush=True)
    for name, w in walls.items():
        runs = " ".join(f"{x:.3f}" for x in w)
        med = statistics.median(w)
        print(f"{name}: median {med:.3f} s ({runs}); index {sorted(digests[name])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
