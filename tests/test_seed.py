"""Seeds (hspz/stages/seed.py) against brute-force Python tables and streams (docs/algorithm.md,
"Seeds").

Every expectation here is recomputed from the raw bytes with plain loops: a window is valid only
when every byte under it is uppercase A/C/G/T, care bases are packed two bits each with the first
care position in the most significant bits.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from hspz.io.packing import pack_bin, seed_codes
from hspz.io.records import Record
from hspz.stages.seed import SeedShape, build_seed_table, hit_seeds, query_seeds, seed_batch_hits

P12OF19 = "TTT0T00TT00T0T0TTTT"
P14OF22 = "TTT0T0TT00TT00T0T0TTTT"
SHORT_PATTERNS = ["1111", "1x01T", "T0T0T0T", "110100111"]
BASE = {ord("A"): 0, ord("C"): 1, ord("G"): 2, ord("T"): 3}


def _care(pattern: str) -> list[int]:
    return [i for i, c in enumerate(pattern) if c in "1T"]


def _kmer(buf: bytes, j: int, pattern: str) -> int | None:
    """The packed k-mer of the window at j, or None when any byte under it is not ACGT."""
    window = buf[j : j + len(pattern)]
    if len(window) < len(pattern) or any(b not in BASE for b in window):
        return None
    k = 0
    for c in _care(pattern):
        k = k * 4 + BASE[window[c]]
    return k


def _buffer(seed: int, n_records: int = 3, length: int = 700, alphabet: bytes = b"ACGT") -> bytes:
    """Records with lowercase, N and IUPAC bytes sprinkled in, packed with '&' separators."""
    rng = np.random.default_rng(seed)
    records = []
    for r in range(n_records):
        seq = bytearray(rng.choice(list(alphabet), length).astype(np.uint8).tobytes())
        for _ in range(6):
            at = int(rng.integers(0, length))
            seq[at] = rng.choice(list(b"acgtNnRYx"))
        records.append(Record(f"r{r}", bytes(seq)))
    return pack_bin(records)


def _brute_table(buf: bytes, block_len: int, pattern: str, step: int):
    size = len(pattern)
    offset = (size + 1) % step
    start_offset = step - offset
    count = max(0, (block_len + offset - size) // step)
    groups: dict[int, list[int]] = {}
    for i in range(count):
        p = start_offset + i * step
        k = _kmer(buf, p, pattern)
        if k is not None:
            groups.setdefault(k, []).append(p)
    n_kmers = 4 ** len(_care(pattern))
    hist = np.zeros(n_kmers, np.int64)
    for k, ps in groups.items():
        hist[k] = len(ps)
    index = np.cumsum(hist)
    pos = [p for k in sorted(groups) for p in groups[k]]
    return index, np.array(pos, dtype=np.int64), groups


# --------------------------------------------------------------------------------------------
# SeedShape
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern, size, care",
    [
        (P12OF19, 19, (0, 1, 2, 4, 7, 8, 11, 13, 15, 16, 17, 18)),
        (P14OF22, 22, (0, 1, 2, 4, 6, 7, 10, 11, 14, 16, 18, 19, 20, 21)),
        ("1x01T", 5, (0, 3, 4)),
        ("1t1t", 4, (0, 2)),  # only '1' and uppercase 'T' are care positions
        ("0110", 4, (1, 2)),
    ],
)
def test_from_pattern_takes_1_and_T_as_care_and_everything_else_as_dont_care(pattern, size, care):
    shape = SeedShape.from_pattern(pattern)
    assert shape.size == size
    assert shape.care == care
    assert shape.weight == len(care)
    assert shape.n_kmers == 4 ** len(care)


# --------------------------------------------------------------------------------------------
# The reference table
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("step", [1, 2, 3])
@pytest.mark.parametrize("pattern", [P12OF19] + SHORT_PATTERNS)
def test_seed_table_equals_brute_force_cumulative_index_and_grouped_positions(pattern, step):
    packed = _buffer(
        seed=len(pattern) * 10 + step, alphabet=b"ACGT" if len(pattern) > 10 else b"AACGT"
    )
    buf = packed.buf.tobytes()
    shape = SeedShape.from_pattern(pattern)
    table = build_seed_table(seed_codes(packed.buf), packed.block_len, shape, step)
    index, pos, groups = _brute_table(buf, packed.block_len, pattern, step)
    assert table.index_table.dtype == np.uint32 and table.pos_table.dtype == np.uint32
    assert len(table.index_table) == 4**shape.weight
    assert np.array_equal(table.index_table.astype(np.int64), index)
    assert np.array_equal(table.pos_table.astype(np.int64), pos)
    assert len(pos) > 100  # the input really exercises the table
    if len(_care(pattern)) <= 5:
        assert max(len(g) for g in groups.values()) > 5  # groups hold several positions


@pytest.mark.parametrize("pattern", [P12OF19, "1111", "1x01T"])
def test_step_one_never_indexes_position_zero_even_when_its_window_is_valid(pattern):
    packed = pack_bin([Record("r", b"ACGT" * 40)])
    assert _kmer(packed.buf.tobytes(), 0, pattern) is not None
    table = build_seed_table(
        seed_codes(packed.buf), packed.block_len, SeedShape.from_pattern(pattern), 1
    )
    assert 0 not in set(table.pos_table.tolist())
    # ...while every other window start up to block_len - size is indexed
    assert sorted(table.pos_table.tolist()) == list(range(1, packed.block_len - len(pattern) + 1))


@pytest.mark.parametrize("bad", [b"a", b"c", b"N", b"n", b"&", b"R", b"x", b"-"])
def test_any_window_touching_a_non_ACGT_byte_is_not_indexed(bad):
    pattern = "1x01T"  # the byte may sit under a don't-care position and still invalidate
    seq = bytearray(b"ACGTTGCAAC" * 6)
    seq[30:31] = bad
    packed = pack_bin([Record("r", bytes(seq))])
    table = build_seed_table(
        seed_codes(packed.buf), packed.block_len, SeedShape.from_pattern(pattern), 1
    )
    indexed = set(table.pos_table.tolist())
    touching = set(range(30 - len(pattern) + 1, 31))
    assert not indexed & touching
    assert set(range(1, packed.block_len - len(pattern) + 1)) - touching == indexed


@pytest.mark.parametrize("step", [2, 3, 4])
def test_step_grid_starts_at_step_minus_size_plus_one_mod_step(step):
    pattern = "1111"  # size 4: offset = 5 % step
    packed = pack_bin([Record("r", b"ACGT" * 30)])
    table = build_seed_table(
        seed_codes(packed.buf), packed.block_len, SeedShape.from_pattern(pattern), step
    )
    got = sorted(table.pos_table.tolist())
    start = step - 5 % step
    assert got[0] == start
    assert all(b - a == step for a, b in zip(got, got[1:], strict=False))
    assert got[-1] <= packed.block_len - 4


# --------------------------------------------------------------------------------------------
# The query stream
# --------------------------------------------------------------------------------------------


def _brute_stream(buf: bytes, pattern: str, first: int, end: int, transition: bool):
    weight = len(_care(pattern))
    kmers, qpos = [], []
    for j in range(first, end):
        k = _kmer(buf, j, pattern)
        if k is None:
            continue
        kmers.append(k)
        qpos.append(j)
        if transition:
            for t in range(weight):
                kmers.append(k ^ (2 << (2 * t)))
                qpos.append(j)
    return kmers, qpos


@pytest.mark.parametrize("transition", [False, True])
@pytest.mark.parametrize("pattern", [P12OF19, "1111", "1x01T", "T0T0T0T"])
@pytest.mark.parametrize("first, end", [(0, 2200), (13, 400), (1500, 10_000), (700, 705)])
def test_query_stream_is_exact_kmer_then_transitions_t0_to_k_minus_1_per_window(
    pattern, transition, first, end
):
    packed = _buffer(seed=3)
    buf = packed.buf.tobytes()
    kmers, qpos = query_seeds(
        seed_codes(packed.buf), SeedShape.from_pattern(pattern), first, end, transition
    )
    exp_k, exp_q = _brute_stream(buf, pattern, first, end, transition)
    assert kmers.tolist() == exp_k
    assert qpos.tolist() == exp_q


def test_transition_zero_flips_the_last_care_base_between_A_and_G():
    packed = pack_bin([Record("r", b"ACGTA")])  # 1111 over ACGT = 0b00_01_10_11
    kmers, _ = query_seeds(seed_codes(packed.buf), SeedShape.from_pattern("1111"), 0, 1, True)
    as_text = ["".join("ACGT"[(int(k) >> (2 * (3 - i))) & 3] for i in range(4)) for k in kmers]
    assert as_text == ["ACGT", "ACGC", "ACAT", "ATGT", "GCGT"]


@pytest.mark.parametrize("transition", [False, True])
@pytest.mark.parametrize("pattern", [P12OF19, "1111", "1x01T"])
def test_batch_hits_is_the_query_stream_with_table_lo_and_counts(pattern, transition):
    ref = _buffer(seed=11, alphabet=b"AACGT")
    qry = _buffer(seed=11, alphabet=b"AACGT", length=600)  # a prefix-sharing query: hits
    shape = SeedShape.from_pattern(pattern)
    table = build_seed_table(seed_codes(ref.buf), ref.block_len, shape, 1)
    _, _, groups = _brute_table(ref.buf.tobytes(), ref.block_len, pattern, 1)
    qcodes = seed_codes(qry.buf)
    total_hits = 0
    for first, end in [(0, 900), (850, 5000), (30, 30)]:
        kmers, qpos, lo, counts = seed_batch_hits(qcodes, shape, first, end, transition, table)
        exp_k, exp_q = _brute_stream(qry.buf.tobytes(), pattern, first, end, transition)
        sk, sq = query_seeds(qcodes, shape, first, end, transition)
        assert kmers.tolist() == exp_k == sk.tolist()
        assert qpos.tolist() == exp_q == sq.tolist()
        assert counts.tolist() == [len(groups.get(k, ())) for k in exp_k]
        assert np.array_equal(counts, table.counts(kmers))
        index = table.index_table.astype(np.int64)
        assert lo.tolist() == [int(index[k - 1]) if k > 0 else 0 for k in exp_k]
        for k, a, c in zip(exp_k[:200], lo[:200].tolist(), counts[:200].tolist(), strict=True):
            assert table.pos_table[a : a + c].tolist() == groups.get(k, [])
        total_hits += int(counts.sum())
    assert total_hits > 1000  # the stream really hits


@pytest.mark.parametrize("transition", [False, True])
@pytest.mark.parametrize("pattern", [P12OF19, "1111", "1x01T"])
def test_hit_seeds_are_the_batch_hits_seeds_that_have_hits(pattern, transition):
    """The CPU engine's stream: seed_batch_hits's seeds with at least one hit, each with its place
    in the whole stream, and the whole stream's length; chunks with no windows and no hits too."""
    ref = _buffer(seed=11, alphabet=b"AACGT")
    qry = _buffer(seed=11, alphabet=b"AACGT", length=600)
    shape = SeedShape.from_pattern(pattern)
    table = build_seed_table(seed_codes(ref.buf), ref.block_len, shape, 1)
    qcodes = seed_codes(qry.buf)
    kept = total = 0
    for first, end in [(0, 900), (850, 5000), (30, 30), (0, 10**6)]:
        _, qpos, lo, counts = seed_batch_hits(qcodes, shape, first, end, transition, table)
        n, h_qpos, h_lo, h_counts, at, hits = hit_seeds(
            qcodes, shape, first, end, transition, table
        )
        some = np.flatnonzero(counts)
        assert n == len(counts) and hits == int(counts.sum())
        assert at.tolist() == some.tolist()
        assert h_qpos.tolist() == qpos[some].tolist()
        assert h_lo.tolist() == lo[some].tolist() and h_counts.tolist() == counts[some].tolist()
        kept += len(some)
        total += n
    assert 0 < kept and (kept < total or shape.n_kmers <= 256)  # a short seed's k-mers all hit


def test_occupancy_bits_are_the_k_mers_with_positions():
    ref = _buffer(seed=5)
    shape = SeedShape.from_pattern("1101T1")  # 4**5 k-mers, some absent from 2 kbp
    table = build_seed_table(seed_codes(ref.buf), ref.block_len, shape, 1)
    bits = np.unpackbits(table.occupied.view(np.uint8), bitorder="little")[: shape.n_kmers]
    has = table.counts(np.arange(shape.n_kmers, dtype=np.uint32)) > 0
    assert np.array_equal(bits.astype(bool), has) and 0 < has.sum() < shape.n_kmers


@pytest.mark.parametrize(
    "pattern, step, threads",
    [
        (P12OF19, 1, 2),
        (P12OF19, 3, 3),
        ("1x01T", 1, 4),
        ("110100111", 2, 7),
        ("1111", 5, 2),
    ],
)
def test_table_built_on_threads_is_the_one_thread_table_byte_for_byte(
    monkeypatch, pattern, step, threads
):
    """The parallel build (k-mer column, then each thread's share of the k-mer space) gives the
    same index and position tables, whatever the thread count, step and N runs; with more
    threads than windows too."""
    from hspz.stages import seed

    monkeypatch.setattr(seed, "PARALLEL_MIN", 0)
    packed = _buffer(seed=step + threads, n_records=5, length=900, alphabet=b"AACGTN")
    shape = SeedShape.from_pattern(pattern)
    one = build_seed_table(seed_codes(packed.buf), packed.block_len, shape, step)
    many = build_seed_table(seed_codes(packed.buf), packed.block_len, shape, step, threads)
    assert many.index_table.dtype == one.index_table.dtype == np.uint32
    assert many.pos_table.dtype == np.uint32
    assert np.array_equal(many.index_table, one.index_table)
    assert np.array_equal(many.pos_table, one.pos_table) and len(one.pos_table) > 0
    assert np.array_equal(many.occupied, one.occupied)
    tiny = pack_bin([Record("t", b"ACGTACGTACGTACGTACGTAC")])
    assert np.array_equal(
        build_seed_table(seed_codes(tiny.buf), tiny.block_len, shape, step, 64).pos_table,
        build_seed_table(seed_codes(tiny.buf), tiny.block_len, shape, step).pos_table,
    )


@pytest.mark.parametrize("threads", [3, 16])
def test_table_built_on_threads_with_one_kmer_range_holding_most_windows(monkeypatch, threads):
    """Poly-A runs put a tenth of the windows on k-mer 0 and far more in the first k-mer
    range (one thread's range sort holds them): still the one-thread table, occupancy bits
    included, on a 12of19 seed whose k-mer space is cut into many ranges."""
    from hspz.stages import seed

    monkeypatch.setattr(seed, "PARALLEL_MIN", 0)
    packed = _buffer(seed=threads, n_records=4, length=3000, alphabet=b"AAAAAAAAAAAAAAACGT")
    shape = SeedShape.from_pattern(P12OF19)
    codes = seed_codes(packed.buf)
    one = build_seed_table(codes, packed.block_len, shape, 1)
    many = build_seed_table(codes, packed.block_len, shape, 1, threads)
    assert int(one.counts(np.zeros(1, np.uint32))[0]) > len(one.pos_table) // 10
    assert np.array_equal(many.index_table, one.index_table)
    assert np.array_equal(many.pos_table, one.pos_table)
    assert np.array_equal(many.occupied, one.occupied)


def _huge_page_advised(a: np.ndarray) -> bool:
    """Whether the mapping holding a's second MiB is advised for transparent huge pages (the
    "hg" VmFlag of /proc/self/smaps; numpy advises from an array's first whole page on)."""
    at = a.__array_interface__["data"][0] + (1 << 20)
    inside = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split()
            if "-" in head[0] and ":" not in head[0]:
                lo, hi = (int(x, 16) for x in head[0].split("-"))
                inside = lo <= at < hi
            elif inside and head[0] == "VmFlags:":
                return "hg" in head[1:]
    raise AssertionError("no mapping holds the array")


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="Linux's smaps")
def test_the_parallel_tables_kmers_are_on_ordinary_pages(monkeypatch):
    """`plain_pages`, where the parallel build writes its transient k-mers, is a writable
    uint32 array that the kernel is not asked to back with huge pages (whose first touch may
    compact memory), where numpy asks it for a large array of its own."""
    from hspz.stages import seed

    kmers = seed.plain_pages(1 << 22)
    assert kmers.dtype == np.uint32 and len(kmers) == 1 << 22 and kmers.flags.writeable
    kmers[:] = 7
    assert not _huge_page_advised(kmers)
    if np._core.multiarray._get_madvise_hugepage():
        assert _huge_page_advised(np.empty(1 << 22, np.uint32))
    assert len(seed.plain_pages(0)) == 0
    made = []
    monkeypatch.setattr(seed, "PARALLEL_MIN", 0)
    monkeypatch.setattr(seed, "plain_pages", lambda n: made.append(n) or np.empty(n, np.uint32))
    packed = _buffer(seed=5, n_records=2, length=900, alphabet=b"ACGT")
    table = build_seed_table(
        seed_codes(packed.buf), packed.block_len, SeedShape(4, (0, 1, 2, 3)), 1, 4
    )
    assert made == [len(table.pos_table)]


def test_the_memory_model_knows_when_the_table_is_built_on_threads():
    from hspz.planning import memory as planning
    from hspz.stages import seed

    assert planning.PARALLEL_TABLE == seed.PARALLEL_MIN
