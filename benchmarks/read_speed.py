"""Read speed of hspz.io.packing.read_records on FASTA, 2bit (and optionally FASTA.gz).

Writes a deterministic random genome (a few records with soft-masked runs and N runs) in each
format, checks that every format decodes to the same records, and prints the median of three
timed reads per format:

    python benchmarks/read_speed.py --mbp 100 --workdir /tmp/read_speed [--gzip]
        [--fresh] [--single] [--package DIR]

`--single` writes the genome as one record.  `--fresh` times each read in a fresh interpreter
(the read a run pays: new pages, nothing cached by the allocator) and gives its peak RSS;
`--package DIR` reads with the hspz package in DIR (another version, side by side).

The figures in BENCHMARKS.md, "Reading inputs" (dev machine; CPU only, no device needed).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from hspz.io.digests import records_digest
from hspz.io.fasta import write_fasta
from hspz.io.readers import read_records
from hspz.io.records import Record
from hspz.io.twobit import write_2bit

RECORD_SHARES = (0.4, 0.25, 0.2, 0.1, 0.05)  # a few records of unequal length
RUN_MEAN = {"lower": 300, "N": 2000}  # mean run lengths
RUNS_PER_MBP = {"lower": 500, "N": 5}


def random_record(rng: np.random.Generator, name: str, length: int) -> Record:
    """Random ACGT with soft-masked runs and N runs (N runs may fall inside masked runs)."""
    seq = np.frombuffer(b"ACGT", dtype=np.uint8)[rng.integers(0, 4, length, dtype=np.uint8)]
    for kind in ("lower", "N"):
        count = max(1, RUNS_PER_MBP[kind] * length // 1_000_000)
        starts = rng.integers(0, length, count)
        ends = np.minimum(starts + rng.geometric(1 / RUN_MEAN[kind], count), length)
        delta = np.zeros(length + 1, dtype=np.int32)
        np.add.at(delta, starts, 1)
        np.add.at(delta, ends, -1)
        inside = np.cumsum(delta[:-1]) > 0
        if kind == "lower":
            seq[inside] |= 0x20
        else:
            seq[inside] = np.where(seq[inside] >= ord("a"), ord("n"), ord("N"))
    return Record(name, seq)


def random_genome(mbp: float, seed: int, shares: tuple[float, ...] = RECORD_SHARES) -> list[Record]:
    rng = np.random.default_rng(seed)
    total = int(mbp * 1_000_000)
    return [random_record(rng, f"chr{i + 1}", int(total * share)) for i, share in enumerate(shares)]


def median_seconds(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


FRESH = """
import json, sys, time
sys.path.insert(0, sys.argv[2])
from hspz.io.digests import records_digest
from hspz.io.readers import read_records
from hspz.run.libc import peak_rss_kib
t = time.perf_counter()
got = read_records(sys.argv[1])
seconds = time.perf_counter() - t
print(json.dumps([seconds, peak_rss_kib() / 1024, records_digest(got)]))
"""


def fresh_read(path: Path, package: Path) -> tuple[float, float, str]:
    """(seconds, peak RSS MiB, records digest) of one read in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", FRESH, str(path), str(package)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(package)},
    )
    seconds, peak, digest = json.loads(done.stdout.splitlines()[-1])
    return seconds, peak, digest


def write_inputs(records: list[Record], workdir: Path, with_gzip: bool) -> dict[str, Path]:
    paths = {"fasta": workdir / "genome.fa", "2bit": workdir / "genome.2bit"}
    write_fasta(paths["fasta"], records)
    write_2bit(paths["2bit"], records)
    if with_gzip:
        paths["fasta.gz"] = workdir / "genome.fa.gz"
        with open(paths["fasta"], "rb") as src, gzip.open(paths["fasta.gz"], "wb", 1) as dst:
            shutil.copyfileobj(src, dst, 1 << 24)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mbp", type=float, default=100.0, help="genome size in Mbp (100)")
    parser.add_argument("--workdir", type=Path, required=True, help="where the inputs go")
    parser.add_argument("--seed", type=int, default=1, help="random seed (1)")
    parser.add_argument("--repeats", type=int, default=3, help="timed reads per format (3)")
    parser.add_argument("--gzip", action="store_true", help="also time FASTA.gz (level 1)")
    parser.add_argument("--fresh", action="store_true", help="each read in a fresh interpreter")
    parser.add_argument("--single", action="store_true", help="one record of the whole size")
    parser.add_argument("--package", type=Path, help="read with the hspz package in this folder")
    args = parser.parse_args()
    package = (args.package or Path(__file__).resolve().parents[1]).resolve()

    args.workdir.mkdir(parents=True, exist_ok=True)
    records = random_genome(args.mbp, args.seed, (1.0,) if args.single else RECORD_SHARES)
    expected = records_digest(records)
    total_mbp = sum(len(r) for r in records) / 1e6
    paths = write_inputs(records, args.workdir, args.gzip)

    print(f"{len(records)} records, {total_mbp:.1f} Mbp, median of {args.repeats} reads")
    if args.fresh:
        print(f"each in a fresh interpreter, package {package}")
        print(f"{'format':<10}{'seconds (runs)':>40}{'peak MiB':>10}  same records")
        for fmt, path in paths.items():
            runs = [fresh_read(path, package) for _ in range(args.repeats)]
            times = " ".join(f"{r[0]:.3f}" for r in runs)
            median = statistics.median(r[0] for r in runs)
            same = all(r[2] == expected for r in runs)
            peak = max(r[1] for r in runs)
            print(f"{fmt:<10}{f'{median:.3f} ({times})':>40}{peak:>10.0f}  {same}")
        return
    print(f"{'format':<10}{'bytes':>14}{'seconds':>10}{'Mbp/s':>10}  same records")
    for fmt, path in paths.items():
        seconds, got = median_seconds(lambda p=path: read_records(p), args.repeats)
        same = records_digest(got) == expected
        size = path.stat().st_size
        print(f"{fmt:<10}{size:>14,}{seconds:>10.3f}{total_mbp / seconds:>10.1f}  {same}")


if __name__ == "__main__":
    main()
