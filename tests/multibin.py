"""A small multi-record pair for the plan/worker/output tests (not a test module).

Six reference records and three query records, a few kbp each, written as FASTA under a test's
directory.  With `FLAGS` the plan has 5 reference bins and 2 query bins (10 units); one record
pair is AT-rich, so its units hold thousands of low-threshold HSPs (files long enough for `-D`
to split) while the others hold a few hundred.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from helpers import BASES, mutate, write_fasta

# a 7-care seed keeps seed tables tiny (4^7 entries) and hits plentiful
FLAGS = [
    "-s",
    "111011001011",
    "-H",
    "150",
    "-E",
    "-B",
    "4000",
    "--query-block-size",
    "7000",
    "-C",
    "1500",
    "-I",
    "2500",
]


def _random(rng, n: int, p=None) -> np.ndarray:
    return BASES[rng.choice(4, n, p=p)]


def _revcomp(s: np.ndarray) -> np.ndarray:
    table = np.zeros(256, np.uint8)
    table[list(b"ACGTN")] = list(b"TGCAN")
    return table[s[::-1]]


def records(seed: int = 7) -> tuple[list[tuple[str, np.ndarray]], list[tuple[str, np.ndarray]]]:
    rng = np.random.default_rng(seed)
    at_rich = [0.4, 0.1, 0.1, 0.4]
    ref = [_random(rng, 3800, at_rich)] + [_random(rng, n) for n in (3500, 3000, 2500, 2000, 1500)]
    ref[2][100:300] = np.frombuffer(b"acgt" * 50, np.uint8)  # soft-masked
    ref[3][50:80] = ord("N")
    qry = [
        _random(rng, 3000, at_rich),
        np.concatenate([mutate(rng, ref[1][:2500], 0.1), mutate(rng, _revcomp(ref[4]), 0.1)]),
        np.concatenate([mutate(rng, _revcomp(ref[2][200:2800]), 0.1), _random(rng, 400)]),
    ]
    return (
        [(f"chr{i}", s) for i, s in enumerate(ref)],
        [(f"contig{i}", s) for i, s in enumerate(qry)],
    )


def write_records(path: Path, recs: list[tuple[str, np.ndarray]]) -> Path:
    """The pair's FASTA layout: 60 bases a line, a description after each name."""
    return write_fasta(path, recs, width=60, description="test record")


def write_pair(directory: Path, seed: int = 7) -> tuple[Path, Path]:
    ref, qry = records(seed)
    return write_records(directory / "ref.fa", ref), write_records(directory / "qry.fa", qry)


def outputs(directory: Path) -> dict[str, bytes]:
    """{file name: bytes} of every regular file in an output directory."""
    return {p.name: p.read_bytes() for p in sorted(Path(directory).iterdir()) if p.is_file()}
