"""The CPU engine's piece size (`engine.cpu.PIECE`) against the wall, interleaved (issue 24).

Each run is a fresh `hspZ run --backend cpu -t T --time` process with `engine.cpu.PIECE` set
before the command starts; every run must print the same digest.

    PYTHONPATH=$PWD python3 benchmarks/piece_sizes.py REF QUERY 32768,65536,131072,262144 16:3,1:1
    (pieces, then threads:rounds pairs; prints each run and a median per (threads, piece))
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

DRIVER = (
    "import sys, hspz.engine.cpu as c; c.PIECE = int(sys.argv.pop(1)); "
    "from hspz.cli import entry; sys.argv[0] = 'hspZ'; entry()"
)


def one(ref: str, qry: str, threads: int, piece: int) -> tuple[float, str]:
    out = f"/tmp/piece-sizes-{threads}-{piece}"
    subprocess.run(["rm", "-rf", out], check=True)
    cmd = [sys.executable, "-c", DRIVER, str(piece), "run", "-r", ref, "-q", qry, "-o", out]
    t0 = time.perf_counter()
    done = subprocess.run(
        [*cmd, "--backend", "cpu", "-t", str(threads)], capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    if done.returncode:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{done.stderr[-2000:]}")
    return wall, next(x for x in done.stdout.splitlines() if x.startswith("digest"))


def main() -> int:
    ref, qry = sys.argv[1], sys.argv[2]
    pieces = [int(x) for x in sys.argv[3].split(",")]
    plan = [tuple(int(v) for v in x.split(":")) for x in sys.argv[4].split(",")]
    walls: dict[tuple[int, int], list[float]] = {}
    digests = set()
    for threads, rounds in plan:
        for _ in range(rounds):
            for piece in pieces:
                wall, digest = one(ref, qry, threads, piece)
                digests.add(digest)
                walls.setdefault((threads, piece), []).append(wall)
                print(f"t={threads} piece=2^{piece.bit_length() - 1} wall={wall:.2f} {digest}")
    for (threads, piece), w in sorted(walls.items()):
        runs = " ".join(f"{x:.2f}" for x in w)
        median = statistics.median(w)
        print(f"t={threads} piece=2^{piece.bit_length() - 1}: median {median:.3f} s ({runs})")
    if len(digests) != 1:
        raise SystemExit(f"the pieces disagree: {sorted(digests)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
