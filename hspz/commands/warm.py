"""`hspZ warm`: compile every GPU kernel a run uses into CuPy's on-disk cache, once per machine.

A first GPU run on a fresh machine otherwise spends 7-15 s in its first unit compiling CuPy's
and hspZ's kernels (55 of them for simM: 14.8 s against 0.36 s warm; BENCHMARKS.md, issue 27).
hspZ's kernel sources depend on the seed shape (`--seed`, compile-time constants) but not on the
layout (-B, bin and seed batch sizes are arguments); CuPy's depend on dtypes, on which code paths a
unit takes and, for its CUB reductions, on the array's size class.  So a tiny pair that takes
every path compiles what later runs of that seed need: here a small simulated pair, as a FASTA
run and as an index run, on both strands, with repeats (many hits a seed), diverged copies
(short HSPs) and a long identical stretch (hits left unfinished by the first passes, chain walks
and the serial sweep), then the FASTA run down each path switch (PATHS), then the reductions at
each size class (REDUCTION_SIZES).  The cache is CuPy's (CUPY_CACHE_DIR, else
~/.cupy/kernel_cache); later processes load the kernels from it.
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from hspz.core.errors import UsageError
from hspz.io.packing import COMPLEMENT

BASES = np.frombuffer(b"ACGT", np.uint8)


def _mutated(rng: np.random.Generator, seq: np.ndarray, rate: float) -> np.ndarray:
    out = seq.copy()
    at = rng.random(len(out)) < rate
    out[at] = BASES[rng.integers(0, 4, int(at.sum()))]
    return out


def warm_pair(seed: int = 27) -> tuple[bytes, bytes]:
    """(reference, query) FASTA texts of the warm-up pair."""
    rng = np.random.default_rng(seed)
    ref = BASES[rng.integers(0, 4, 160_000)]
    repeat = BASES[rng.integers(0, 4, 300)]
    for at in range(2_000, 150_000, 3_000):  # a repeat family: many hits per seed
        ref[at : at + 300] = _mutated(rng, repeat, 0.05)
    ref = ref.copy()
    soft = ref[100_000:101_000].tobytes().lower()
    ref_text = ref.tobytes()
    ref_text = (
        ref_text[:100_000] + soft + ref_text[101_000:120_000] + b"N" * 500 + ref_text[120_500:]
    )
    parts = [
        ref[10_000:40_000].tobytes(),  # identical for 30 kbp: long HSPs, late hits, sweeps
        _mutated(rng, ref[50_000:60_000], 0.1).tobytes(),  # short HSPs
        COMPLEMENT[_mutated(rng, ref[70_000:80_000], 0.05)[::-1]].tobytes(),
        BASES[rng.integers(0, 4, 20_000)].tobytes(),
    ]
    query = b"".join(parts)
    return (
        b">w1\n" + ref_text[:90_000] + b"\n>w2\n" + ref_text[90_000:] + b"\n",
        b">q1\n" + query + b"\n",
    )


# The FASTA run again with each switch that sends a unit down another path, so that every path
# compiles its kernels (none of these changes bytes; tests/test_gpu.py checks each):
# `hspz.engine.gpu` constants (every late hit walked again; pieces of a few hits; every
# --max-hits walk on the host; chain walks capped at 3 bases, so diagonals go to the serial
# sweep) and environment knobs (the CPU seeder).
PATHS: tuple[dict[str, int | str], ...] = (
    {"FEW_LATE": 0},
    {"PIECE": 4096},
    {"DEVICE_STEPS": 0},
    {"CHAIN_CAP": 3},
    {"env:HSPZ_DEVICE_SEEDS": "0"},
)


def _again(argv: list[str], d: Path, k: int) -> list[str]:
    out = argv.index("-o") + 1
    return argv[:out] + [str(d / f"path{k}")] + argv[out + 1 :]


@contextlib.contextmanager
def _path(switches: dict) -> Iterator[None]:
    """gpu-module constants and environment variables set for one step, then restored."""
    import os

    from hspz.engine import gpu

    saved = {}
    for key, value in switches.items():
        if key.startswith("env:"):
            saved[key] = os.environ.get(key[4:])
            os.environ[key[4:]] = value
        else:
            saved[key] = getattr(gpu, key)
            setattr(gpu, key, value)
    try:
        yield
    finally:
        for key, value in saved.items():
            if not key.startswith("env:"):
                setattr(gpu, key, value)
            elif value is None:
                os.environ.pop(key[4:], None)
            else:
                os.environ[key[4:]] = value


# Array sizes that give CuPy's CUB reductions each of their block sizes (32 to 512 threads: the
# size over 4, to the next power of 2; `cupy/_core/_cub_reduction.pyx`), then a large one.
REDUCTION_SIZES = (100, 256, 512, 1024, 4096, 1 << 22)


def _reductions() -> None:
    """The reductions the GPU backend takes over a group's late hits (`any`, `count_nonzero`
    and `flatnonzero` of flags) at every block size CuPy compiles them with: the size of those
    arrays follows the data, not the layout, and each block size is a kernel of its own.  After
    a warm-up without this, simM's first unit still compiled cupy_cub_any_pass1/2 (5.6 s
    against 0.35 s); without `flatnonzero` here, cupy_nonzero_kernel (nineteenth session)."""
    import cupy as cp

    for n in REDUCTION_SIZES:
        flags = cp.zeros(n, cp.bool_)
        bool(flags.any())
        int(cp.count_nonzero(flags))
        flags[::3] = True
        cp.flatnonzero(flags)


def warm_command(main: Callable[[list[str]], int], seed: str | None = None) -> int:
    """Run the warm-up pair through the GPU backend with `seed` (None: the default seed): a
    FASTA run, an index build and an index run, then the FASTA run down each of PATHS, each
    through `main` (the command line's entry, handed down by cli.py)."""
    from hspz.engine import backends

    if not backends.gpu_available():
        raise UsageError("warm: no CUDA device is visible (is CuPy installed?)")
    t0 = time.perf_counter()
    ref, qry = warm_pair()
    with tempfile.TemporaryDirectory(prefix="hspz-warm-") as tmp:
        d = Path(tmp)
        (d / "ref.fa").write_bytes(ref)
        (d / "qry.fa").write_bytes(qry)
        seeded = [] if seed is None else ["--seed", seed]
        common = ["-q", str(d / "qry.fa"), "--backend", "gpu", "-B", "100k", *seeded]
        steps = [
            ["run", "-r", str(d / "ref.fa"), "-o", str(d / "fasta"), *common],
            [
                "index",
                "-r",
                str(d / "ref.fa"),
                "--index",
                str(d / "idx"),
                "-B",
                "100k",
                "--backend",
                "gpu",
                *seeded,
            ],
            ["run", "--index", str(d / "idx"), "-o", str(d / "indexed"), *common],
        ]
        runs: list[tuple[list[str], dict]] = [(argv, {}) for argv in steps]
        runs += [(_again(steps[0], d, k), switches) for k, switches in enumerate(PATHS)]
        for argv, switches in runs:
            said = io.StringIO()
            with (
                contextlib.redirect_stderr(said),
                contextlib.redirect_stdout(io.StringIO()),
                _path(switches),
            ):
                status = main(argv)
            if status:  # the step's own one-line message, then its status
                print(said.getvalue().rstrip().splitlines()[-1], file=sys.stderr)
                return status
    _reductions()
    print(
        f"warm: GPU kernels compiled into CuPy's cache in {time.perf_counter() - t0:.1f} s",
        file=sys.stderr,
    )
    return 0
