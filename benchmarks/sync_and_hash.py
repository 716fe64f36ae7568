"""Two fixed costs of the workflow's plan and merge, measured on the machine's own disk and
cores (issue 25 item 6):

- syncing N folders that each gained a file, one after another (`durable.fsync_dir` in a loop)
  against at once (`durable.fsync_dirs`), as a merge's publish does for its job folders;
- recognising a reference by its whole-file sha256 (`file_sha256`) against its piece hashes
  on threads (`file_pieces`), as the plan does before it writes the plan.

Rounds are interleaved; medians and every run are printed, one JSON line each.

    python3 benchmarks/sync_and_hash.py --folders 20 --dir /tmp/sync --file REF.2bit --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hspz.core import durable  # noqa: E402
from hspz.formats import index as ix  # noqa: E402


def touched_folders(root: Path, n: int) -> list[Path]:
    """N fresh folders under `root`, each given one new synced file."""
    folders = []
    for _k in range(n):
        f = root / uuid.uuid4().hex
        f.mkdir(parents=True)
        durable.write_new(f / "x", b"x" * 4096)
        folders.append(f)
    durable.fsync_dir(root)
    return folders


def sync_round(root: Path, n: int, at_once: bool) -> float:
    folders = touched_folders(root, n)
    t = time.perf_counter()
    if at_once:
        durable.fsync_dirs(folders)
    else:
        for f in folders:
            durable.fsync_dir(f)
    return time.perf_counter() - t


def hash_round(path: str, pieces: bool) -> float:
    t = time.perf_counter()
    ix.file_pieces(path) if pieces else ix.file_sha256(path)
    return time.perf_counter() - t


def report(label: str, runs: list[float]) -> None:
    print(json.dumps({"what": label, "median_s": statistics.median(runs), "runs": runs}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--folders", type=int, default=20)
    ap.add_argument("--dir", default="/tmp/sync_and_hash")
    ap.add_argument("--file", help="a reference file to hash (skipped when not given)")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    root = Path(a.dir)
    shutil.rmtree(root, ignore_errors=True)
    seq: list[float] = []
    par: list[float] = []
    for _ in range(a.rounds):
        seq.append(round(sync_round(root / "seq", a.folders, False), 4))
        par.append(round(sync_round(root / "par", a.folders, True), 4))
    report(f"fsync {a.folders} folders one after another", seq)
    report(f"fsync {a.folders} folders at once (fsync_dirs)", par)
    shutil.rmtree(root, ignore_errors=True)
    if a.file:
        size = os.stat(a.file).st_size
        hash_round(a.file, False)  # the page cache, as the plan finds it after the index
        whole: list[float] = []
        pieces: list[float] = []
        for _ in range(a.rounds):
            whole.append(round(hash_round(a.file, False), 4))
            pieces.append(round(hash_round(a.file, True), 4))
        report(f"sha256 of {size} bytes", whole)
        report(f"piece hashes of {size} bytes on {os.cpu_count()} cores", pieces)
    return 0


if __name__ == "__main__":
    sys.exit(main())
