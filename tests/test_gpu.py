"""GPU backend: byte identity with the CPU backend on every case, knob and a random property sweep.

Skipped where CuPy sees no CUDA device (CI has none); run on the device machine with
`pytest -m gpu`.
"""

from __future__ import annotations

import gzip
import os
import shutil
import zlib
from pathlib import Path

import numpy as np
import pytest
from helpers import write_fasta
from scorefiles import MILLION

from hspz.cli import main

pytestmark = pytest.mark.gpu


def _gpu_visible() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


if not _gpu_visible():
    pytest.skip("no CUDA device visible", allow_module_level=True)

EXAMPLES = Path(os.environ.get("HSPZ_EXAMPLES", "/usr/share/doc/lastz/examples/test_data"))
RNG_SEED = 20261129


def related_pair(rng: np.random.Generator, n: int = 6000) -> tuple[bytes, bytes]:
    """A reference and a query derived from it: substitutions, indels, a repeat, N, lowercase."""
    base = rng.choice(np.frombuffer(b"ACGT", np.uint8), n)
    unit = rng.choice(np.frombuffer(b"ACGT", np.uint8), int(rng.integers(20, 60)))
    at = int(rng.integers(0, n - 1500))
    base[at : at + 20 * len(unit)] = np.tile(unit, 20)[: len(base[at : at + 20 * len(unit)])]
    q = base.copy()
    subs = rng.random(n) < rng.uniform(0.01, 0.12)
    q[subs] = rng.choice(np.frombuffer(b"ACGT", np.uint8), int(subs.sum()))
    cut = int(rng.integers(100, n - 100))
    q = np.concatenate((q[:cut], q[cut + int(rng.integers(1, 9)) :]))
    ins = int(rng.integers(100, len(q) - 100))
    q = np.concatenate((q[:ins], rng.choice(np.frombuffer(b"ACGT", np.uint8), 7), q[ins:]))
    nrun = int(rng.integers(0, len(q) - 60))
    q[nrun : nrun + 40] = ord("N")
    low = int(rng.integers(0, n - 300))
    base[low : low + 200] = np.char.lower(base[low : low + 200].view("S1")).view(np.uint8)
    if rng.random() < 0.5:
        q = q[::-1].copy()
        q = np.frombuffer(bytes(q).translate(bytes.maketrans(b"ACGTN", b"TGCAN")), np.uint8)
    return bytes(base), bytes(q)


def run_both(tmp: Path, ref: Path, qry: Path, *flags: str, env: dict | None = None) -> None:
    """Run the CPU and the GPU backend; assert identical file names and bytes."""
    outs = {}
    for backend in ("cpu", "gpu"):
        out = tmp / f"out-{backend}"
        shutil.rmtree(out, ignore_errors=True)
        saved = dict(os.environ)
        os.environ.update(env if backend == "gpu" and env else {})
        try:
            assert (
                main(
                    [
                        "run",
                        "-r",
                        str(ref),
                        "-q",
                        str(qry),
                        "-o",
                        str(out),
                        "--backend",
                        backend,
                        *flags,
                    ]
                )
                == 0
            )
        finally:
            os.environ.clear()
            os.environ.update(saved)
        outs[backend] = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
    assert outs["gpu"] == outs["cpu"]


@pytest.fixture(scope="module")
def examples(tmp_path_factory) -> dict[str, Path]:
    if not EXAMPLES.is_dir():
        pytest.skip("lastz-examples not installed")
    d = tmp_path_factory.mktemp("examples")
    out = {}
    for name in ("pseudocat.fa", "pseudopig.fa"):
        out[name] = d / name
        out[name].write_bytes(gzip.decompress((EXAMPLES / f"{name}.gz").read_bytes()))
    return out


def test_gpu_seed_table_equals_cpu_seed_table():
    import cupy as cp

    from hspz.engine import gpu
    from hspz.io.packing import seed_codes
    from hspz.stages.seed import SeedShape, build_seed_table

    rng = np.random.default_rng(RNG_SEED)
    alphabet = np.frombuffer(b"ACGTacgtN&", np.uint8)
    buf = rng.choice(alphabet, 200_000, p=[0.2] * 4 + [0.02] * 4 + [0.06, 0.06])
    for pattern, step in (("TTT0T00TT00T0T0TTTT", 1), ("TTT0T00TT00T0T0TTTT", 3), ("1101", 2)):
        shape = SeedShape.from_pattern(pattern)
        codes = seed_codes(buf)
        cpu = build_seed_table(codes, len(buf) - 1, shape, step)
        it, pt = gpu.build_table(shape, step, cp.asarray(codes), len(buf) - 1)
        assert np.array_equal(it.get(), cpu.index_table)
        assert np.array_equal(pt.get(), cpu.pos_table)


def test_gpu_codes_equal_host_codes():
    import cupy as cp

    from hspz.engine import gpu
    from hspz.io.packing import score_codes, seed_codes
    from hspz.stages.seed import SeedShape

    buf = np.arange(256, dtype=np.uint8).repeat(3)
    for n in (0, 5, len(buf)):  # shorter than the pads too
        seed, score = gpu._codes(SeedShape.from_pattern("1101"), buf[:n])
        assert np.array_equal(seed.get(), seed_codes(buf[:n]))
        padded = score.base.get()
        assert np.array_equal(padded[gpu.PAD : gpu.PAD + n], score_codes(buf[:n]))
        assert (padded[: gpu.PAD] == 7).all() and (padded[gpu.PAD + n :] == 7).all()
        assert len(padded) == n + 2 * gpu.PAD and cp.shares_memory(score, score.base)


def test_gpu_minus_strand_made_on_the_device_has_the_uploaded_strands_codes(monkeypatch):
    """gpu.MINUS_ON_DEVICE (issue 27's trial): every byte value but the separator, U and X
    among them, whose complements' codes are not their codes' complements."""
    from hspz.core.options import Options
    from hspz.engine import gpu
    from hspz.engine.contract import Context, prepare_query
    from hspz.io.records import Record

    rng = np.random.default_rng(RNG_SEED)
    every = np.arange(256, dtype=np.uint8).repeat(3)
    some = rng.choice(np.frombuffer(b"ACGTUXn", np.uint8), 999)
    records = [Record("a", every[every != ord("&")]), Record("b", some)]
    ctx = Context.from_options(Options())
    qry = prepare_query(ctx, 0, records)
    codes = {}
    for on in (False, True):
        monkeypatch.setattr(gpu, "MINUS_ON_DEVICE", on)
        qry.__dict__.pop("_device", None)
        made = gpu._device_query(ctx, qry)
        codes[on] = {s: (seed.get(), score.base.get()) for s, (seed, score) in made.items()}
    assert sorted(codes[True]) == ["minus", "plus"]
    for strand in ("plus", "minus"):
        for k in (0, 1):
            assert np.array_equal(codes[True][strand][k], codes[False][strand][k]), strand


def test_gpu_equals_cpu_on_lastz_examples(tmp_path, examples):
    run_both(tmp_path, examples["pseudopig.fa"], examples["pseudocat.fa"])


@pytest.mark.parametrize(
    "env",
    [
        {"HSPZ_DEVICE_SEEDS": "0"},  # 1 is the default: the other cases run it
        {"HSPZ_CHUNK_WALK": "full"},
        {"HSPZ_REF_BUCKETS": "1"},
        {"HSPZ_REF_BUCKET_SHIFT": "16"},
        {"HSPZ_REF_BUCKETS": "0", "HSPZ_REF_BUCKET_SHIFT": "16"},  # 0 overrides a shift
        {"HSPZ_GPU_FILTER": "hits2"},
        {"HSPZ_GPU_FILTER": "hits4"},
        {"HSPZ_GPU_FILTER": "pass"},
        {"HSPZ_GPU_FILTER": "lane4"},
        {"HSPZ_GPU_FILTER": "lane"},
        {"HSPZ_GPU_FILTER": "nib"},
    ],
    ids=lambda e: ",".join(f"{k}={v}" for k, v in e.items()),
)
def test_gpu_equals_cpu_under_every_knob(tmp_path, examples, env):
    run_both(tmp_path, examples["pseudopig.fa"], examples["pseudocat.fa"], "-m", "300", env=env)


@pytest.mark.parametrize("threads", ["1", "4", "7"])
def test_gpu_host_threads_never_change_bytes(tmp_path, examples, threads):
    """-t at, below and above gpu.HOST_THREADS (the host halves' threads while launching)."""
    run_both(
        tmp_path, examples["pseudopig.fa"], examples["pseudocat.fa"], "-m", "300", "-t", threads
    )


def test_gpu_physical_pieces_never_change_bytes(tmp_path, examples, monkeypatch):
    from hspz.engine import gpu

    monkeypatch.setattr(gpu, "PIECE", 97)
    run_both(tmp_path, examples["pseudopig.fa"], examples["pseudocat.fa"], "-m", "400")


@pytest.mark.parametrize("piece", [97, 5000, 1 << 28])
def test_gpu_filter_never_changes_bytes(tmp_path, monkeypatch, piece):
    """The default filter (filter_seed16) on related pairs with repeats, N, lowercase and
    sequence ends, in pieces of a few hits and of all of them, with either seeder."""
    from hspz.engine import gpu

    monkeypatch.setattr(gpu, "PIECE", piece)
    rng = np.random.default_rng(RNG_SEED + piece)
    pairs = [related_pair(rng, int(rng.integers(3000, 12000))) for _ in range(3)]
    r = write_fasta(tmp_path / "r.fa", [(f"r{i}", a) for i, (a, _) in enumerate(pairs)])
    q = write_fasta(tmp_path / "q.fa", [(f"q{i}", b) for i, (_, b) in enumerate(pairs)])
    for seeds in ("0", "1"):
        run_both(tmp_path, r, q, "-m", "500", env={"HSPZ_DEVICE_SEEDS": seeds})


@pytest.mark.parametrize(
    "variant", ["pass", "hits2", "hits4", "lane", "lane4", "lane8", "nib", "nib16", "seed"]
)
def test_gpu_filter_variants_never_change_bytes(tmp_path, monkeypatch, variant):
    """Each other filter (HSPZ_GPU_FILTER: `pass` and `lane`, former defaults, and experimental
    ones) on related pairs with repeats, N, lowercase and sequence ends, in pieces of 97 hits
    (a piece's last block of threads part full)."""
    from hspz.engine import gpu

    monkeypatch.setattr(gpu, "PIECE", 97)
    rng = np.random.default_rng(RNG_SEED + 27)
    pairs = [related_pair(rng, int(rng.integers(3000, 12000))) for _ in range(3)]
    r = write_fasta(tmp_path / "r.fa", [(f"r{i}", a) for i, (a, _) in enumerate(pairs)])
    q = write_fasta(tmp_path / "q.fa", [(f"q{i}", b) for i, (_, b) in enumerate(pairs)])
    run_both(tmp_path, r, q, "-m", "500", env={"HSPZ_GPU_FILTER": variant})


@pytest.mark.parametrize(
    "seeds, piece, args",
    [
        ("0", 97, ()),
        ("1", 1 << 28, ()),
        ("1", 97, ("-a", "iupac,7,100", "-S", "minus")),
        ("0", 5000, ("-a", "n", "-x", "31990")),  # the halves' floor: filter_seed16 still
        ("1", 5000, ("-x", "40000")),  # past the halves: filter_seed
    ],
)
@pytest.mark.parametrize("lean", [False, True])
def test_gpu_seed_filter_never_changes_bytes(tmp_path, monkeypatch, seeds, piece, args, lean):
    """filter_seed16 and filter_seed (the left side bounded beyond the seed first, from the
    query's seed bounds) on related pairs with repeats, N, lowercase and sequence ends, with
    either seeder, on both strands or the minus alone, N and IUPAC scored; each as its plain
    and its LEAN kernel (gpu.LEAN_HITS: pieces of 97 hits end blocks inside a chunk, and the
    chunks of a block's first and last hit differ where a seed batch ends inside it)."""
    from hspz.engine import gpu

    monkeypatch.setattr(gpu, "PIECE", piece)
    monkeypatch.setattr(gpu, "LEAN_HITS", lean)
    launched = set()
    kernel = gpu._kernel

    def spy(shape, module, name):
        launched.add(name)
        return kernel(shape, module, name)

    monkeypatch.setattr(gpu, "_kernel", spy)
    rng = np.random.default_rng(RNG_SEED + 28 + piece)
    pairs = [related_pair(rng, int(rng.integers(3000, 12000))) for _ in range(3)]
    r = write_fasta(tmp_path / "r.fa", [(f"r{i}", a) for i, (a, _) in enumerate(pairs)])
    q = write_fasta(tmp_path / "q.fa", [(f"q{i}", b) for i, (_, b) in enumerate(pairs)])
    env = {"HSPZ_GPU_FILTER": "seed16", "HSPZ_DEVICE_SEEDS": seeds}
    run_both(tmp_path, r, q, "-m", "500", *args, env=env)
    ran = launched & {"filter_seed16", "filter_seed", "filter_seed16_lean", "filter_seed_lean"}
    assert ran and all(name.endswith("_lean") == lean for name in ran)


@pytest.mark.parametrize("xdrop", ["31990", "40000"])
def test_gpu_default_filter_past_its_16_bit_halves(tmp_path, examples, xdrop):
    """An x-drop that filter_seed16's halves cannot hold (gpu.HALF) takes filter_seed instead,
    and one just under it keeps filter_seed16 (its floor then -1): the CPU's bytes either way."""
    run_both(tmp_path, examples["pseudopig.fa"], examples["pseudocat.fa"], "-m", "300", "-x", xdrop)


def test_warm_compiles_what_a_later_run_needs(tmp_path):
    """`hspZ warm` into a fresh CuPy cache; a later run in a new process (a FASTA run and an
    index run of another pair, another -B) adds no compiled kernel to that cache."""
    import subprocess
    import sys

    env = dict(os.environ, CUPY_CACHE_DIR=str(tmp_path / "cache"))
    hspz = [sys.executable, "-m", "hspz"]
    done = subprocess.run([*hspz, "warm"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    cached = sorted(p.name for p in (tmp_path / "cache").rglob("*") if p.is_file())
    assert len(cached) > 10
    rng = np.random.default_rng(5)
    ref, qry = related_pair(rng, 30_000)
    r = write_fasta(tmp_path / "r.fa", [("chrA", ref), ("chrB", ref[::-1])])
    q = write_fasta(tmp_path / "q.fa", [("qA", qry)])
    for args in (
        ["run", "-r", str(r), "-q", str(q), "-o", str(tmp_path / "o1"), "-B", "40k"],
        ["index", "-r", str(r), "--index", str(tmp_path / "idx"), "-B", "25k"],
        [
            "run",
            "--index",
            str(tmp_path / "idx"),
            "-q",
            str(q),
            "-o",
            str(tmp_path / "o2"),
            "-B",
            "25k",
        ],
    ):
        done = subprocess.run(
            [*hspz, *args, "--backend", "gpu"], env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
    after = sorted(p.name for p in (tmp_path / "cache").rglob("*") if p.is_file())
    assert after == cached


def run_many_groups(tmp_path: Path, rng: np.random.Generator, seeds: str, maxhits=("60", "3000")):
    """Both backends on a pair of many seed batches (-C 700) and semantic chunks (-m) per
    group, both strands; HSPZ_DEVICE_SEEDS=seeds."""
    ref, qry = related_pair(rng, 9000)
    r = write_fasta(tmp_path / "r.fa", [("r1", ref), ("r2", ref[::-1])])
    q = write_fasta(tmp_path / "q.fa", [("q1", qry), ("q2", ref[3000:5000])])
    for m in maxhits:
        flags = ("-H", "1800", "-C", "700", "-I", "4000", "-m", m)
        run_both(tmp_path, r, q, *flags, env={"HSPZ_DEVICE_SEEDS": seeds})


@pytest.mark.parametrize("group, head", [(1, 8), (3000, 1), (1 << 24, 8)])
@pytest.mark.parametrize("seeds", ["0", "1"])
def test_gpu_batch_groups_never_change_bytes(tmp_path, monkeypatch, group, head, seeds):
    """One seed batch a group, a few (3000 window starts: -C 700 batches four or so), every
    one of an interval; semantic chunks and pieces cutting across them; a first group as
    large as the rest (gpu.HEAD 1).  A smaller one (HEAD 8, one seed batch) at 3000 window
    starts is the AHEAD test's default case."""
    from hspz.engine import gpu

    monkeypatch.setattr(gpu, "GROUP_BASES", group)
    monkeypatch.setattr(gpu, "HEAD", head)
    monkeypatch.setattr(gpu, "PIECE", 5000)
    run_many_groups(tmp_path, np.random.default_rng(group), seeds)


@pytest.mark.parametrize("ahead", [0, 1, 3])
@pytest.mark.parametrize("seeds", ["0", "1"])
def test_gpu_filters_launched_ahead_never_change_bytes(tmp_path, monkeypatch, ahead, seeds):
    """gpu.AHEAD: each piece's filter launched 0, 1 or 3 pieces before it is walked, across
    groups of 3000 window starts and pieces of 5000 hits, with either seeder: the same bytes;
    each filter on this thread's filter stream, the rest on its launching stream (AHEAD > 0),
    or all on the one stream (0)."""
    import cupy as cp

    from hspz.engine import gpu

    monkeypatch.setattr(gpu, "AHEAD", ahead)
    monkeypatch.setattr(gpu, "GROUP_BASES", 3000)
    monkeypatch.setattr(gpu, "PIECE", 5000)
    streams = []
    plain = gpu._Group.launch_filter

    def launch(self, h0, h1, shift, stream=None):
        here = cp.cuda.get_current_stream()
        streams.append((here, stream, gpu._streams() if ahead else (None, None)))
        return plain(self, h0, h1, shift, stream)

    monkeypatch.setattr(gpu._Group, "launch_filter", launch)
    run_many_groups(tmp_path, np.random.default_rng(27 + ahead), seeds)
    assert len(streams) > 10
    for here, stream, (launching, filters) in streams:
        if ahead:
            assert here.ptr == launching.ptr != 0 and stream is filters and stream.ptr != 0
            assert launching.priority < filters.priority == 0  # lower is sooner (PRIORITY)
        else:
            assert stream is None and here.ptr == cp.cuda.Stream.null.ptr


def test_gpu_fused_kernels_equal_the_expressions_they_stand_for(monkeypatch):
    """gpu.FUSED (issue 27's trial): _pack, _unpack and by_diagonal, each both ways, on hits
    with repeats, every diagonal order and positions near 2**32."""
    import cupy as cp

    from hspz.engine import gpu

    rng = np.random.default_rng(29)
    qlen = 1 << 20
    ref_len = 2**32 - 1 - qlen  # the most a bin and a query bin may span for one radix key
    R = np.concatenate((rng.integers(0, ref_len, 5000), rng.integers(0, 50, 3000)))
    Q = np.concatenate((rng.integers(0, qlen, 5000), rng.integers(0, 50, 3000)))
    R[:10], Q[:10] = R[10:20], Q[10:20]  # the same hit twice
    tags = cp.asarray(rng.integers(0, 9, len(R)).astype(np.uint32))
    got = {}
    for fused in (False, True):
        monkeypatch.setattr(gpu, "FUSED", fused)
        pairs = gpu._pack(cp.asarray(R), cp.asarray(Q))
        unpacked = gpu._unpack(pairs)
        rows = gpu.by_diagonal(pairs, tags, ref_len, qlen)
        got[fused] = [x.get() for x in (pairs, *unpacked, *rows)]
        assert [x.dtype for x in rows] == [np.int64, np.int64, np.uint32]
    for a, b in zip(got[False], got[True], strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    for n, span in ((0, ref_len), (1, ref_len), (50, 2**32)):  # the paths FUSED leaves alone
        pairs = gpu._pack(cp.asarray(R[:n]), cp.asarray(Q[:n]))
        rows = {}
        for fused in (False, True):
            monkeypatch.setattr(gpu, "FUSED", fused)
            rows[fused] = [x.get() for x in gpu.by_diagonal(pairs, tags[:n], span, qlen)]
        for a, b in zip(rows[False], rows[True], strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b), (n, span)


def test_gpu_fused_kernels_never_change_bytes(tmp_path, monkeypatch):
    from hspz.engine import gpu

    used: dict[str, int] = {}
    plain = gpu._fused

    def counted(name):
        used[name] = used.get(name, 0) + 1
        return plain(name)

    monkeypatch.setattr(gpu, "_fused", counted)
    monkeypatch.setattr(gpu, "FUSED", True)
    monkeypatch.setattr(gpu, "GROUP_BASES", 1000)
    monkeypatch.setattr(gpu, "PIECE", 5000)
    run_many_groups(tmp_path, np.random.default_rng(31), "1")
    assert {"pack", "diagonal_key", "sorted_hits"} <= set(used), used  # by_diagonal's fused path


@pytest.mark.parametrize(
    "flags",
    [
        (),
        ("--notransition",),
        ("--step", "3"),
        ("--seed", "14of22"),
        ("--seed", "1110110111"),
        ("--noentropy",),
        ("--strand", "minus"),
        ("-C", "700", "-I", "1500"),
        ("-m", "50"),
        ("--ambiguous", "iupac,50,100"),
        ("-H", "1500", "-x", "400"),
    ],
)
def test_gpu_equals_cpu_for_each_option(tmp_path, flags):
    rng = np.random.default_rng(zlib.crc32(repr(flags).encode()))
    ref, qry = related_pair(rng)
    r = write_fasta(tmp_path / "r.fa", [("r1", ref), ("r2", ref[::-1])])
    q = write_fasta(tmp_path / "q.fa", [("q1", qry)])
    run_both(tmp_path, r, q, "-H", "2000", *flags)


def test_gpu_equals_cpu_on_random_related_pairs(tmp_path):
    rng = np.random.default_rng(RNG_SEED)
    for i in range(25):
        ref, qry = related_pair(rng, int(rng.integers(2000, 9000)))
        r = write_fasta(tmp_path / f"r{i}.fa", [("chrA", ref)])
        half = len(qry) // 2
        q = write_fasta(tmp_path / f"q{i}.fa", [("qA", qry[:half]), ("qB", qry[half:])])
        hsp_threshold, min_match = int(rng.integers(1200, 3500)), int(rng.integers(50, 5000))
        run_both(tmp_path, r, q, "-H", str(hsp_threshold), "-m", str(min_match))


def test_gpu_long_identical_hsp_uses_the_sweep_and_matches(tmp_path):
    rng = np.random.default_rng(7)
    seq = bytes(rng.choice(np.frombuffer(b"ACGT", np.uint8), 60_000))
    r = write_fasta(tmp_path / "r.fa", [("r", seq)])
    q = write_fasta(tmp_path / "q.fa", [("q", seq[1000:50_000])])
    run_both(tmp_path, r, q)


@pytest.mark.parametrize("seed", ["12of19", "14of22", "1111"])
def test_gpu_query_seeds_staged_equal_the_plain_kernel(monkeypatch, seed):
    """gpu.SEEDS_STAGED: query_seeds' slots stored through shared memory give the plain
    kernel's seed stream (lo, counts, valid windows), with transitions (without, one slot a
    window, both launch the plain kernel), over window counts that end inside a block and
    windows with N."""
    import cupy as cp

    from hspz.core.options import Options
    from hspz.engine import gpu
    from hspz.engine.contract import Context, prepare_query, prepare_reference
    from hspz.io.records import Record

    rng = np.random.default_rng(41)
    seq = rng.choice(np.frombuffer(b"ACGTN", np.uint8), 70_000, p=[0.24] * 4 + [0.04])
    for transition in (True, False):
        ctx = Context.from_options(Options(seed=seed, transition=transition))
        ref = prepare_reference(ctx, 0, [Record("r", seq[: 1 << 15].copy())])
        qry = prepare_query(ctx, 0, [Record("q", seq.copy())])
        dref = gpu._device_ref(ctx, ref)
        codes = gpu._device_query(ctx, qry)["plus"][0]
        for first, end in ((0, 60_001), (5, 5 + 256), (1000, 1001), (7, 7)):
            got = {}
            for staged in (False, True):
                monkeypatch.setattr(gpu, "SEEDS_STAGED", staged)
                lo, counts, _, variants, valid = gpu._device_seeds(ctx, dref, codes, first, end)
                got[staged] = [cp.asnumpy(x) for x in (lo, counts, valid)]
            assert variants == (len(ctx.shape.care) + 1 if transition else 1)
            for a, b in zip(got[False], got[True], strict=True):
                assert a.dtype == b.dtype and np.array_equal(a, b)
            if end - first > 50_000:
                assert got[True][1].sum() > 1000 and 0 < got[True][2].sum() < end - first


def test_gpu_reference_order_is_the_seed_order_hits_sorted_by_window():
    from hspz.core.options import Options
    from hspz.engine import gpu
    from hspz.engine.contract import Context, prepare_query, prepare_reference
    from hspz.io.records import Record
    from hspz.stages.seed import seed_batch_hits

    rng = np.random.default_rng(5)
    unit = rng.choice(np.frombuffer(b"ACGT", np.uint8), 300)
    seq = np.concatenate(
        [rng.choice(np.frombuffer(b"ACGT", np.uint8), 2000) if i % 2 else unit for i in range(40)]
    )  # 20 repeat copies: many hits per seed
    ctx = Context.from_options(Options())
    ref = prepare_reference(ctx, 0, [Record("r", seq)])
    qry = prepare_query(ctx, 0, [Record("q", seq[5000:30_000].copy())])
    g = gpu._Group(
        ctx,
        gpu._device_ref(ctx, ref),
        qry,
        gpu._device_query(ctx, qry),
        "plus",
        [(0, 9000), (9000, qry.block_len)],
    )
    kmers, qpos, lo, counts = seed_batch_hits(
        qry.seed["plus"], ctx.shape, 0, qry.block_len, True, ref.table
    )
    owner = np.repeat(np.arange(len(counts)), counts)
    j = np.arange(len(owner)) - np.repeat(np.cumsum(counts) - counts, counts)
    rpos = ref.table.pos_table[lo[owner] + j].astype(np.uint64)
    want = (rpos << np.uint64(32)) | qpos[owner].astype(np.uint64)
    n = g.total
    assert n == len(want) > 10_000
    edges = sorted({0, 4321, int(g.hit_edges[1])}) + [n]  # chunk starts: tags follow them
    g.use_chunks(edges[:-1])
    chunk = np.searchsorted(np.array(edges), np.arange(n), side="right") - 1
    for h0, h1 in ((0, n), (123, n - 77)):
        for shift in (0, 6, 16):
            pairs, tags = (x.get() for x in g.ref_order(h0, h1 - h0, shift))
            assert np.all(np.diff(pairs >> np.uint64(32 + shift)) >= 0)
            got = np.lexsort((pairs, tags))
            ref_sorted = np.lexsort((want[h0:h1], chunk[h0:h1]))
            assert np.array_equal(pairs[got], want[h0:h1][ref_sorted])
            assert np.array_equal(tags[got], chunk[h0:h1][ref_sorted])


@pytest.mark.parametrize("caps", [(64, 64, 16), (24, 100, 1), (40, 10**6, 10**9)])
def test_gpu_walk_caps_never_change_bytes(tmp_path, monkeypatch, caps):
    """CAP, CAP2 and FEW_LATE (1: unfinished hits always walked again unsorted; 10**9: never)."""
    from hspz.engine import gpu

    monkeypatch.setattr(gpu, "CAP", caps[0])
    monkeypatch.setattr(gpu, "CAP2", caps[1])
    monkeypatch.setattr(gpu, "FEW_LATE", caps[2])
    rng = np.random.default_rng(caps[0] + caps[1])
    for i in range(4):
        ref, qry = related_pair(rng, 8000)
        r = write_fasta(tmp_path / f"r{i}.fa", [("chrA", ref)])
        q = write_fasta(tmp_path / f"q{i}.fa", [("qA", qry)])
        run_both(tmp_path, r, q, "-H", "1500")


def test_gpu_raw_dump_and_counts_equal_cpu_with_repeated_hsps(tmp_path, capsys):
    rng = np.random.default_rng(9)
    seq = bytes(rng.choice(np.frombuffer(b"ACGT", np.uint8), 30_000))
    r = write_fasta(tmp_path / "r.fa", [("r", seq)])
    q = write_fasta(tmp_path / "q.fa", [("q", seq[2000:9000] + seq[15_000:15_900])])
    raw, counts = {}, {}
    for backend in ("cpu", "gpu"):
        capsys.readouterr()
        assert (
            main(
                [
                    "run",
                    "-r",
                    str(r),
                    "-q",
                    str(q),
                    "-o",
                    str(tmp_path / backend),
                    "--backend",
                    backend,
                    "--dump-raw",
                    str(tmp_path / f"{backend}.raw"),
                ]
            )
            == 0
        )
        counts[backend] = [x for x in capsys.readouterr().err.splitlines() if x.startswith("#")]
        raw[backend] = (tmp_path / f"{backend}.raw").read_bytes()
    assert raw["gpu"] == raw["cpu"] and counts["gpu"] == counts["cpu"]
    n_raw = int([x for x in counts["cpu"] if x.startswith("#raw HSPs")][0].split()[-1])
    assert n_raw > 1000  # hits on the long HSPs repeat the same records many times


@pytest.mark.parametrize("chain_cap", [1 << 12, 3, 0])
def test_gpu_sweep_equals_the_host_sweep(monkeypatch, chain_cap):
    """The device's extension of late hits (chain walks, with diagonals whose walks reach
    CHAIN_CAP swept serially: none, some, all) against `xdrop.extend_sorted` on the same sorted
    hits: many hits on a few long diagonals (one repeated), single hits, both sequence ends."""
    import cupy as cp

    from hspz.core.options import Options
    from hspz.engine import gpu
    from hspz.engine.contract import Context, prepare_query, prepare_reference
    from hspz.io.records import Record
    from hspz.stages import xdrop

    monkeypatch.setattr(gpu, "CHAIN_CAP", chain_cap)
    rng = np.random.default_rng(13)
    seq = rng.choice(np.frombuffer(b"ACGTacgt", np.uint8), 40_000, p=[0.24] * 4 + [0.01] * 4)
    q = seq[2000:32_000].copy()
    subs = rng.random(len(q)) < 0.03
    q[subs] = rng.choice(np.frombuffer(b"ACGTN", np.uint8), int(subs.sum()))
    ctx = Context.from_options(Options(hspthresh=1))  # keep nearly everything: compare all
    ref = prepare_reference(ctx, 0, [Record("r", seq)])
    qry = prepare_query(ctx, 0, [Record("q", q)])
    g = gpu._Group(
        ctx,
        gpu._device_ref(ctx, ref),
        qry,
        gpu._device_query(ctx, qry),
        "plus",
        [(0, qry.block_len)],
    )
    Q = np.concatenate(
        (
            rng.integers(0, len(q), 3000),
            rng.integers(0, 50, 20),
            len(q) - 1 - rng.integers(0, 50, 20),
            rng.integers(0, len(q), 200),
        )
    )
    Q[:3] = Q[3:6]  # the same hit twice
    R = Q + 2000
    R[-200:] = rng.integers(0, len(seq), 200)  # random diagonals, mostly single hits
    tags = cp.asarray(rng.integers(0, 5, len(R)).astype(np.uint32))
    dR, dQ, dT = gpu.by_diagonal(gpu._pack(cp.asarray(R), cp.asarray(Q)), tags, g.dref.len, g.qlen)
    got = [x.get() for x in g.sweep(dR, dQ, dT)]
    Rs, Qs = dR.get(), dQ.get()
    want = xdrop.extend_sorted(
        ref.score,
        qry.score["plus"],
        ref.packed.block_len,
        qry.packed["plus"].block_len,
        ctx.matrix,
        ctx.options.xdrop,
        Rs,
        Qs,
        xdrop.diagonal_starts(Rs - Qs),
    )
    keep = want[0] >= 1
    assert keep.sum() > 3000
    for a, b in zip(got, [*want, dT.get()], strict=True):
        assert np.array_equal(a, b[keep])


def test_gpu_distinct_rows_and_copies():
    import cupy as cp

    from hspz.engine import gpu

    rng = np.random.default_rng(17)
    n = 20_000
    rs, qs = rng.integers(0, 2**32 - 1, 50)[rng.integers(0, 50, n)], rng.integers(0, 30, n)
    ln, tag = rng.integers(0, 3, n), rng.integers(0, 4, n)
    score = rs % 1000 + qs * 7 + ln  # a function of the row, as real scores are
    cols, copies = gpu._distinct(
        [cp.asarray(x) for x in (score, rs, qs, ln, tag.astype(np.uint32))]
    )
    keys, counts = np.unique(np.stack((tag, rs, qs, ln)), axis=1, return_counts=True)
    got = [c.get() for c in cols]
    assert np.array_equal(np.stack((got[4], got[1], got[2], got[3])), keys)
    assert np.array_equal(copies.get(), counts) and np.array_equal(
        got[0], keys[1] % 1000 + keys[2] * 7 + keys[3]
    )


def test_gpu_run_loads_no_numba_and_equals_cpu(tmp_path):
    """A small GPU run in a fresh process loads no numba (`hspz.core.jit`) and writes the CPU
    backend's bytes, on both strands, with the raw dump."""
    import subprocess
    import sys

    rng = np.random.default_rng(19)
    ref, qry = related_pair(rng, 20_000)
    r = write_fasta(tmp_path / "r.fa", [("chrA", ref)])
    q = write_fasta(tmp_path / "q.fa", [("qA", qry)])
    outs = {}
    for backend in ("gpu", "cpu"):
        args = [
            "run",
            "-r",
            str(r),
            "-q",
            str(q),
            "-o",
            str(tmp_path / backend),
            "--backend",
            backend,
            "--dump-raw",
            str(tmp_path / backend / "raw"),
        ]
        (tmp_path / backend).mkdir()
        code = (
            f"import sys; from hspz.cli import main; assert main({args!r}) == 0; "
            "print('numba' in sys.modules)"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        outs[backend] = (
            done.stdout.split()[-1],
            {p.name: p.read_bytes() for p in sorted((tmp_path / backend).iterdir())},
        )
    assert outs["gpu"][0] == "False" and outs["cpu"][0] == "True"
    assert outs["gpu"][1] == outs["cpu"][1] and len(outs["gpu"][1]["raw"]) > 0


def test_gpu_chunk_walks_equal_the_host_walks():
    """`plan.chunk_walks` over a device prefix sum (CuPy) against the same over numpy, on
    groups with giant seeds and empty batches, at several --max-hits."""
    import cupy as cp

    from hspz.stages.chunks import chunk_walks

    rng = np.random.default_rng(31)
    for _ in range(40):
        counts = rng.integers(0, 40, int(rng.integers(1, 4000)))
        counts[rng.random(len(counts)) < 0.01] = 5000
        cum = np.cumsum(counts)
        slots = np.unique(
            np.concatenate(([0, len(cum)], rng.integers(0, len(cum), int(rng.integers(0, 30)))))
        )
        edges = np.concatenate(([0], cum))[slots]
        for max_hits in (997, 5000, 1 << 24):  # up to about 100 searches a batch
            assert chunk_walks(cp, cp.asarray(cum), slots, edges, max_hits) == chunk_walks(
                np, cum, slots, edges, max_hits
            )


# --------------------------------------------------------------------------------------------
# The reference index on the device
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    """The multibin pair, its index built on the GPU and on the CPU, and a run without it."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from multibin import FLAGS, outputs, write_pair

    d = tmp_path_factory.mktemp("gpu-index")
    ref, qry = write_pair(d)
    for backend in ("gpu", "cpu"):
        assert (
            main(
                [
                    "index",
                    "-r",
                    str(ref),
                    "--index",
                    str(d / f"ix-{backend}"),
                    "-s",
                    "111011001011",
                    "-B",
                    "4000",
                    "--backend",
                    backend,
                ]
            )
            == 0
        )
    assert (
        main(
            [
                "run",
                "-r",
                str(ref),
                "-q",
                str(qry),
                "-o",
                str(d / "plain"),
                *FLAGS,
                "--backend",
                "cpu",
            ]
        )
        == 0
    )
    return d, ref, qry, FLAGS, outputs(d / "plain"), outputs


def test_gpu_built_index_has_the_bytes_of_the_cpu_built_index(indexed):
    d = indexed[0]
    for path in sorted((d / "ix-cpu").rglob("*")):
        twin = d / "ix-gpu" / path.relative_to(d / "ix-cpu")
        assert path.is_dir() or twin.read_bytes() == path.read_bytes(), path


def test_gpu_loaded_bins_equal_the_bins_the_device_builds(indexed):
    import cupy as cp

    from hspz.core.options import Options
    from hspz.engine import gpu
    from hspz.engine.contract import Context, prepare_reference
    from hspz.formats import index as ix
    from hspz.io.readers import read_records

    d, ref = indexed[0], indexed[1]
    idx = ix.open_index(d / "ix-gpu")
    ctx = Context.from_options(Options(seed="111011001011"))
    records = read_records(ref)
    for b, members in enumerate(idx.bins):
        loaded = gpu._device_ref(ctx, gpu.load_reference(ctx, idx, b))
        built = gpu._device_ref(
            ctx, prepare_reference(ctx, b, [records[k] for k in members], False)
        )
        assert loaded.len == built.len
        for name in ("index_table", "pos_table"):
            assert cp.array_equal(getattr(loaded, name), getattr(built, name))
        n = built.len + 1 + gpu.PAD  # the codes, the final '&' and the padding after them
        assert cp.array_equal(loaded.score[:n], built.score[:n])


@pytest.mark.parametrize(
    "extra", [[], ["--gpus", "2"], ["-r", "REF"], ["-r", "REF", "--gpus", "3"]]
)
def test_gpu_run_with_the_index_writes_the_bytes_of_a_run_without(indexed, tmp_path, extra):
    d, ref, qry, flags, plain, outputs = indexed
    extra = [str(ref) if a == "REF" else a for a in extra]
    assert (
        main(
            [
                "run",
                "--index",
                str(d / "ix-gpu"),
                "-q",
                str(qry),
                "-o",
                str(tmp_path / "o"),
                *flags,
                "--backend",
                "gpu",
                *extra,
            ]
        )
        == 0
    )
    assert outputs(tmp_path / "o") == plain


# ---- scores at the bounds of options.py (SCORE_MAX, XDROP_MAX, HSPTHRESH_MAX) ---------------


def _segment_lines(out: Path) -> list[list[str]]:
    return [
        line.split("\t")
        for p in sorted(out.glob("*.segments"))
        for line in p.read_text().splitlines()
    ]


def test_gpu_an_hsp_scoring_past_2_to_the_31_prints_whole_and_equals_cpu(tmp_path):
    seq = bytes(np.random.default_rng(3).choice(np.frombuffer(b"ACGT", np.uint8), 3000))
    r = write_fasta(tmp_path / "r.fa", [("s", seq)])
    (tmp_path / "scores.txt").write_text(MILLION)
    run_both(
        tmp_path, r, r, "--scoring", str(tmp_path / "scores.txt"), "-x", "5000000", "-S", "plus"
    )
    assert ["s", "1", "3000", "s", "1", "3000", "+", "3000000000"] in _segment_lines(
        tmp_path / "out-gpu"
    )


def test_gpu_identical_long_pair_with_a_wide_score_equals_cpu(tmp_path):
    seq = bytes(np.random.default_rng(4).choice(np.frombuffer(b"ACGT", np.uint8), 150_000))
    r = write_fasta(tmp_path / "r.fa", [("s", seq)])
    (tmp_path / "scores.txt").write_text(MILLION.replace("1000000", "30000"))
    run_both(
        tmp_path, r, r, "--scoring", str(tmp_path / "scores.txt"), "-x", "5000000", "-S", "plus"
    )
    assert ["s", "1", "150000", "s", "1", "150000", "+", "4500000000"] in _segment_lines(
        tmp_path / "out-gpu"
    )


@pytest.mark.parametrize("hspthresh", ["1000000", "2147483647"])
def test_gpu_largest_legal_scores_and_xdrop_equal_cpu(tmp_path, hspthresh):
    """Entries of +-SCORE_MAX and the x-drop at XDROP_MAX (the separator scores -1e8) through
    the int32 capped walks, on related pairs of two records a side."""
    (tmp_path / "scores.txt").write_text(MILLION)
    rng = np.random.default_rng(int(hspthresh) % 1000)
    for i in range(3):
        ref, qry = related_pair(rng, 6000)
        r = write_fasta(tmp_path / f"r{i}.fa", [("rA", ref[:3000]), ("rB", ref[3000:])])
        q = write_fasta(tmp_path / f"q{i}.fa", [("qA", qry[:2500]), ("qB", qry[2500:])])
        run_both(
            tmp_path,
            r,
            q,
            "--scoring",
            str(tmp_path / "scores.txt"),
            "-x",
            "10000000",
            "-H",
            hspthresh,
        )


_DRIVER_AND_CUPY = """
import json, sys
from hspz.engine import cuda_driver
first = sys.argv[1]
def driver():
    return [[d.sm_count, d.l2_bytes, d.name, d.total_bytes] for d in cuda_driver.devices()], \\
        cuda_driver.free_bytes()
def runtime():
    import cupy
    rt = cupy.cuda.runtime
    props = [rt.getDeviceProperties(i) for i in range(rt.getDeviceCount())]
    devs = [[p["multiProcessorCount"], p["l2CacheSize"], p["name"].decode(),
             p["totalGlobalMem"]] for p in props]
    return devs, cupy.cuda.Device(0).mem_info[0]
got = {first: (driver() if first == "driver" else runtime())}
other = "runtime" if first == "driver" else "driver"
got[other] = driver() if other == "driver" else runtime()
print(json.dumps(got))
"""


@pytest.mark.parametrize("first", ["driver", "runtime"])
def test_the_cuda_driver_sees_the_devices_cupy_sees(first):
    """`engine.cuda_driver` (what every plan reads, without CuPy) gives CuPy's figures: each
    device's SMs, L2, name and memory, and device 0's free memory, asked first or second in a
    fresh process."""
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _DRIVER_AND_CUPY, first], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["driver"][0] == got["runtime"][0]
    assert abs(got["driver"][1] - got["runtime"][1]) <= 64 << 20, got


def test_a_gpu_plan_imports_no_cupy(tmp_path):
    """`hspZ plan --backend gpu` reads the devices through the driver: CuPy is never imported,
    and its plan is the plan `hspZ plan` made with CuPy loaded first (the same devices and
    free memory seen, the same layout)."""
    import subprocess
    import sys

    rng = np.random.default_rng(RNG_SEED)
    ref, qry = related_pair(rng, 6000)
    r = write_fasta(tmp_path / "r.fa", [("r", ref)])
    q = write_fasta(tmp_path / "q.fa", [("q", qry)])
    code = (
        "import sys\n"
        "if sys.argv[2] == 'cupy': import cupy; cupy.cuda.Device(0).mem_info\n"
        "from hspz.cli import main\n"
        "rc = main(['plan', '-r', sys.argv[3], '-q', sys.argv[4], '--backend', 'gpu', "
        "'-o', sys.argv[1]])\n"
        "print(rc, 'cupy' in sys.modules)\n"
    )
    plans = {}
    for how in ("plain", "cupy"):
        plans[how] = tmp_path / f"plan-{how}.txt"
        done = subprocess.run(
            [sys.executable, "-c", code, str(plans[how]), how, str(r), str(q)],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["0", "True" if how == "cupy" else "False"], done.stdout
    assert plans["plain"].read_bytes() == plans["cupy"].read_bytes()
