"""Side-by-side runner: hspZ (CPU backend, GPU backend) and `lastz --nogapped` on one workload.

    python benchmarks/run.py hpylori --repeat 3 [--workdir bench-data] [--no-gpu] [--no-lastz]

Every arm is a separate process timed from outside (wall and peak RSS from `/usr/bin/time`-style
`resource` accounting), run `--repeat` times; the table reports medians.  hspZ arms must print the
same digest, or the runner fails.  LASTZ is single-threaded: it is run as is, and also over query
pieces on all cores (the query split into one piece per core, pieces run in parallel), the way
its users parallelise it; the pieces' HSPs differ slightly at piece boundaries, so that arm is a
speed reference only.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.workloads import materialise  # noqa: E402
from hspz.sequence import Record, read_records, write_fasta  # noqa: E402

LASTZ_FORMAT = "general-:name1,start1,end1,name2,start2,end2,strand2,score"


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, int, str]:
    """(wall seconds, peak RSS in KiB of the child, combined output) of one command."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**os.environ, **(env or {})})
    out = proc.stdout.read()
    proc.stdout.close()
    _, status, usage = os.wait4(proc.pid, 0)  # reaped here, so the child's own peak RSS
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{out.decode()[-2000:]}")
    return wall, usage.ru_maxrss, out.decode(errors="replace")


def hspz_arm(ref: Path, qry: Path, out: Path, backend: str, threads: int) -> list[str]:
    return [sys.executable, "-m", "hspz", "run", "-r", str(ref), "-q", str(qry), "-o", str(out),
            "--backend", backend, "-t", str(threads), "--time"]


def counts(text: str) -> dict:
    got = {k: int(v) for k, v in re.findall(r"^#(seeds|seed hits|raw HSPs|HSPs): (\d+)$", text,
                                             re.M)}
    digest = re.search(r"^digest: (\w+)$", text, re.M)
    engine = sum(float(row.split("\t")[8]) for row in text.splitlines()
                 if row.startswith("unit ledger:\t") and row.split("\t")[1] != "ordinal")
    return dict(got, digest=digest.group(1) if digest else None, engine_ms=engine)


def plain_fasta(path: Path, work: Path) -> Path:
    """LASTZ reads neither gzip nor 2bit-with-long-names reliably: a plain FASTA copy."""
    dst = work / (path.name.split(".")[0] + ".plain.fa")
    if not dst.exists():
        write_fasta(dst, read_records(path))
    return dst


def lastz_cmd(ref: Path, qry: Path) -> list[str]:
    return ["lastz", f"{ref}[multiple,nameparse=darkspace]", f"{qry}[nameparse=darkspace]",
            "--nogapped", f"--format={LASTZ_FORMAT}"]


def query_pieces(qry: Path, n: int, work: Path) -> list[Path]:
    """The query cut into n pieces of about equal bp (records split where needed)."""
    records = read_records(qry)
    total = sum(len(r) for r in records)
    size = -(-total // n)
    pieces, current, filled = [], [], 0
    for rec in records:
        start = 0
        while start < len(rec):
            take = min(len(rec) - start, size - filled)
            current.append(Record(f"{rec.name}_{start}", rec.seq[start : start + take]))
            filled += take
            start += take
            if filled == size:
                pieces.append(current)
                current, filled = [], 0
    if current:
        pieces.append(current)
    paths = []
    for i, recs in enumerate(pieces):
        paths.append(work / f"piece{i}.fa")
        write_fasta(paths[-1], recs)
    return paths


def lastz_parallel(ref: Path, pieces: list[Path]) -> tuple[float, int, str]:
    t0 = time.perf_counter()
    with ThreadPoolExecutor(len(pieces)) as pool:
        outs = list(pool.map(lambda p: timed(lastz_cmd(ref, p)), pieces))
    return time.perf_counter() - t0, max(o[1] for o in outs), "".join(o[2] for o in outs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", default=str(ROOT / "bench-data"))
    ap.add_argument("--no-gpu", action="store_true")
    ap.add_argument("--no-lastz", action="store_true")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args()
    work = Path(a.workdir)
    work.mkdir(parents=True, exist_ok=True)
    files = materialise(a.workload, work)
    ref, qry = Path(files["reference"]), Path(files["query"])
    tmp = Path(tempfile.mkdtemp(prefix="hspz-run-"))
    arms = {"hspZ cpu -t 1": hspz_arm(ref, qry, tmp / "c1", "cpu", 1),
            f"hspZ cpu -t {a.threads}": hspz_arm(ref, qry, tmp / "cn", "cpu", a.threads)}
    if not a.no_gpu:
        arms["hspZ gpu"] = hspz_arm(ref, qry, tmp / "g", "gpu", a.threads)
    subprocess.run(hspz_arm(ref, qry, tmp / "warm", "cpu", 1)[:-1], capture_output=True)  # numba
    rows = {}
    for name, cmd in arms.items():
        runs = [timed(cmd) for _ in range(a.repeat)]
        rows[name] = (runs, counts(runs[-1][2]))
    digests = {c["digest"] for _, c in rows.values()}
    if len(digests) != 1:
        raise SystemExit(f"hspZ backends disagree: {digests}")
    if not a.no_lastz and shutil.which("lastz"):
        r_fa, q_fa = plain_fasta(ref, work), plain_fasta(qry, work)
        rows["lastz --nogapped"] = ([timed(lastz_cmd(r_fa, q_fa)) for _ in range(a.repeat)], {})
        pieces = query_pieces(q_fa, a.threads, tmp)
        rows[f"lastz x{len(pieces)} query pieces"] = (
            [lastz_parallel(r_fa, pieces) for _ in range(a.repeat)], {})
    print_table(a.workload, rows, a.repeat)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


def print_table(workload: str, rows: dict, repeat: int) -> None:
    base = statistics.median(r[0] for r in rows.get("lastz --nogapped", ([(1.0, 0, "")], {}))[0])
    print(f"workload {workload}: median of {repeat} runs, {os.cpu_count()} cores")
    print("| arm | wall s (median) | all runs | peak RSS MiB | seeds | hits | HSPs | ns/hit | "
          "vs lastz |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, (runs, c) in rows.items():
        walls = [r[0] for r in runs]
        med = statistics.median(walls)
        hits = c.get("seed hits")
        nsph = f"{c['engine_ms'] * 1e6 / hits:.2f}" if hits else "-"
        print(f"| {name} | {med:.2f} | {' '.join(f'{w:.2f}' for w in walls)} | "
              f"{max(r[1] for r in runs) / 1024:.0f} | {c.get('seeds', '-')} | {hits or '-'} | "
              f"{c.get('HSPs', '-')} | {nsph} | {base / med:.2f}x |")


if __name__ == "__main__":
    raise SystemExit(main())
