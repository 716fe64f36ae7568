"""Tests of the benchmark genome-pair simulator (benchmarks/simulate.py), the exact hit counter
(benchmarks/hit_density.py) and the named workloads (benchmarks/workloads.py).  Small sizes only.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest

from benchmarks.hit_density import (
    BINS,
    CARE,
    SPAN,
    count_hits,
    hits_by_permutation,
    hits_from_histograms,
    kmer_histogram,
    lowercase_fraction,
)
from benchmarks.simulate import (
    TRANSITION,
    PairSpec,
    _branch_rates,
    _model,
    _random_bases,
    _substitute_at_rate,
    simulate_pair,
    simulate_queries,
    spec_digest,
    write_pair,
)
from benchmarks.workloads import load_workloads, materialise, workload_spec

TARGET_DENSITY = 6.3e-7  # both strands, hits / bp², hg38 chr20 x mm39 4 Mbp
ALLOWED = np.frombuffer(b"ACGTacgtN", dtype=np.uint8)


def _total(records) -> int:
    return sum(seq.size for _, seq in records)


def _same(a, b) -> bool:
    return len(a) == len(b) and all(
        na == nb and np.array_equal(sa, sb) for (na, sa), (nb, sb) in zip(a, b, strict=True)
    )


@pytest.fixture(scope="module")
def small_pair():
    return simulate_pair(PairSpec(ref_mbp=2.0, query_mbp=0.5, seed=3))


def test_deterministic_and_seeded(small_pair):
    ref, query = small_pair
    again = simulate_pair(PairSpec(ref_mbp=2.0, query_mbp=0.5, seed=3))
    assert _same(ref, again[0]) and _same(query, again[1])
    other = simulate_pair(PairSpec(ref_mbp=2.0, query_mbp=0.5, seed=4))
    assert not _same(ref, other[0]) and not _same(query, other[1])


@pytest.mark.parametrize(
    ("ref_mbp", "query_mbp", "chromosomes"), [(2.0, 0.5, 4), (1.0, 1.0, 3), (0.4, 0.6, 1)]
)
def test_sizes_alphabet_masking_and_gaps(ref_mbp, query_mbp, chromosomes):
    spec = PairSpec(ref_mbp=ref_mbp, query_mbp=query_mbp, chromosomes=chromosomes)
    ref, query = simulate_pair(spec)
    assert len(ref) == chromosomes
    assert abs(_total(ref) - ref_mbp * 1e6) <= 0.01 * ref_mbp * 1e6
    assert abs(_total(query) - query_mbp * 1e6) <= 0.01 * query_mbp * 1e6
    for records in (ref, query):
        seqs = [seq for _, seq in records]
        assert all(seq.dtype == np.uint8 and np.isin(seq, ALLOWED).all() for seq in seqs)
        assert sum(int(np.count_nonzero(seq == ord("N"))) for seq in seqs) > 0
        assert 0.35 < lowercase_fraction(records) < 0.65
    assert len({name for name, _ in ref} | {name for name, _ in query}) == len(ref) + len(query)


def _kmer_set(records, k: int = 16) -> np.ndarray:
    """Exact unmasked k-mers (uppercase ACGT only) of the records as uint32 codes."""
    code = np.full(256, 4, dtype=np.uint8)
    for i, b in enumerate(b"ACGT"):
        code[b] = i
    out = []
    for _, seq in records:
        vals = code[seq]
        n = seq.size - k + 1
        key = np.zeros(n, dtype=np.uint32)
        bad = np.zeros(n, dtype=bool)
        for j in range(k):
            key = (key << np.uint32(2)) | (vals[j : j + n] & 3)
            bad |= vals[j : j + n] > 3
        out.append(key[~bad])
    return np.unique(np.concatenate(out))


def test_query_is_related_to_reference(small_pair):
    """Unmasked 16-mers of the query are found in the reference far more often than those of
    an unrelated genome; about as often as divergence and ancestral_kept predict."""
    ref, query = small_pair
    close = simulate_pair(PairSpec(1.0, 0.5, divergence=0.05, ancestral_kept=0.9, seed=3))
    unrelated = simulate_pair(PairSpec(ref_mbp=0.5, query_mbp=0.5, seed=99))[1]
    ref_set = _kmer_set(ref)
    shared = np.isin(_kmer_set(query), ref_set, assume_unique=True).mean()
    chance = np.isin(_kmer_set(unrelated), ref_set, assume_unique=True).mean()
    assert shared > 8 * chance and shared > 0.02, (shared, chance)
    shared_close = np.isin(_kmer_set(close[1]), _kmer_set(close[0]), assume_unique=True).mean()
    assert shared_close > 0.2 and shared_close > 50 * chance, (shared_close, chance)


def test_reference_ignores_query_only_fields_and_batch_queries_match_pairs():
    spec = PairSpec(ref_mbp=1.0, query_mbp=0.3, seed=5)
    ref, query = simulate_pair(spec)
    other_ref, other_query = simulate_pair(dataclasses.replace(spec, query_seed=8, query_mbp=0.2))
    assert _same(ref, other_ref) and not _same(query, other_query)
    assert spec_digest(spec, reference_only=True) == spec_digest(
        dataclasses.replace(spec, query_seed=8), reference_only=True
    )
    batch_ref, queries = simulate_queries(spec, [5, 8])
    assert _same(batch_ref, ref) and _same(queries[0], query)
    assert _same(queries[1], simulate_pair(dataclasses.replace(spec, query_seed=8))[1])
    sampled = simulate_pair(dataclasses.replace(spec, query_sampling="sampled", query_piece_kbp=50))
    assert _same(sampled[0], ref) and abs(_total(sampled[1]) - 0.3e6) < 3000


def test_substitutions_hit_divergence_and_ts_tv():
    rng = np.random.default_rng(0)
    ancestor = _random_bases(rng, 400_000, 0.41)
    for divergence in (0.15, 0.4):
        ref_rate, query_rate = _branch_rates(PairSpec(1.0, 1.0, divergence=divergence))
        model = _model(2.0, 0.41)
        ref, query = ancestor.copy(), ancestor.copy()
        _substitute_at_rate(rng, ref, ref_rate, model)
        _substitute_at_rate(rng, query, query_rate, model)
        differ = ref != query
        transitions = np.count_nonzero(differ & (TRANSITION[ref] == query))
        assert differ.mean() == pytest.approx(divergence, abs=0.01)
        assert transitions / (differ.sum() - transitions) == pytest.approx(2.0, rel=0.1)
        gc = np.isin(query, np.frombuffer(b"CG", np.uint8)).mean()
        assert gc == pytest.approx(0.41, abs=0.01)


# ---------------------------------------------------------------------------------------------
# Hit counter
# ---------------------------------------------------------------------------------------------


def _brute_hits(ref: list[str], query: list[str]) -> int:
    """Independent count with strings: every query window's 13 variants against a Counter of
    reference windows (19 uppercase ACGT bytes; care positions from the pattern text)."""
    care = [i for i, c in enumerate("TTT0T00TT00T0T0TTTT") if c == "T"]
    swap = {"A": "G", "G": "A", "C": "T", "T": "C"}

    def windows(seq: str):
        for p in range(len(seq) - 18):
            w = seq[p : p + 19]
            if all(c in "ACGT" for c in w):
                yield "".join(w[i] for i in care)

    table = Counter(k for s in ref for k in windows(s))
    hits = 0
    for s in query:
        for k in windows(s):
            hits += table[k]
            hits += sum(table[k[:j] + swap[k[j]] + k[j + 1 :]] for j in range(len(k)))
    return hits


def _revcomp(s: str) -> str:
    return s[::-1].translate(str.maketrans("ACGTacgt", "TGCAtgca"))


def _skewed_random(rng: np.random.Generator, n: int) -> str:
    """Low-entropy random text so that 12-mers collide; some lowercase runs and Ns."""
    seq = rng.choice(np.frombuffer(b"ACGT", np.uint8), n, p=[0.7, 0.1, 0.1, 0.1])
    for start in rng.integers(0, n - 60, n // 400):
        seq[start : start + rng.integers(5, 60)] |= 0x20
    seq[rng.integers(0, n, n // 500)] = ord("N")
    return seq.tobytes().decode()


def test_hit_counter_matches_brute_force():
    rng = np.random.default_rng(7)
    ref = [_skewed_random(rng, 3000), _skewed_random(rng, 1200)]
    query = [_skewed_random(rng, 1500), _skewed_random(rng, 300)]
    as_records = [
        [(f"r{i}", np.frombuffer(s.encode(), np.uint8)) for i, s in enumerate(group)]
        for group in (ref, query)
    ]
    result = count_hits(*as_records)
    expect_plus = _brute_hits(ref, query)
    assert expect_plus > 1000
    assert result.plus == expect_plus
    assert result.minus == _brute_hits(ref, [_revcomp(s) for s in query])
    assert result.ref_bp == 4200 and result.query_bp == 1800
    q_hist = kmer_histogram(seq for _, seq in as_records[1])
    r_hist = kmer_histogram(seq for _, seq in as_records[0])
    assert q_hist.size == BINS and CARE.size == 12 and SPAN == 19
    by_permutation = hits_by_permutation(q_hist, r_hist)
    assert by_permutation == hits_from_histograms(q_hist, r_hist) == expect_plus


def test_hit_density_in_calibrated_band():
    """Defaults are tuned at 64 x 4 Mbp to ~6.3e-7 hits/bp² over both strands (hg38 chr20 x
    mm39); a small pair must land in a slightly wider band (+-40%)."""
    ref, query = simulate_pair(PairSpec(ref_mbp=6.0, query_mbp=1.0, seed=2))
    result = count_hits(ref, query)
    assert 0.6 * TARGET_DENSITY < result.density_both < 1.4 * TARGET_DENSITY
    assert 0.3 < result.ref_seedable / result.ref_bp < 0.65


# ---------------------------------------------------------------------------------------------
# Files and workloads
# ---------------------------------------------------------------------------------------------


def test_write_pair_round_trips(tmp_path):
    sequence = pytest.importorskip("hspz.io.readers")
    spec = PairSpec(ref_mbp=0.2, query_mbp=0.1, chromosomes=2, seed=11)
    paths = write_pair(spec, tmp_path)
    ref, query = simulate_pair(spec)
    assert set(paths) == {"ref.fa", "query.fa", "ref.2bit", "query.2bit"}
    for key, records in (("ref", ref), ("query", query)):
        for fmt in ("fa", "2bit"):
            back = [(r.name, r.seq) for r in sequence.read_records(paths[f"{key}.{fmt}"])]
            assert _same(back, records)


def test_forked_pair_equals_the_serial_pair(tmp_path):
    """write_pair_2bit (ancestor chromosomes, then both genomes, in forked processes) writes the
    bytes write_pair writes from simulate_pair."""
    from benchmarks.simulate import write_pair_2bit

    spec = PairSpec(ref_mbp=0.6, query_mbp=0.4, chromosomes=3, seed=5, divergence=0.3)
    serial = write_pair(spec, tmp_path / "serial", formats=("2bit",))
    write_pair_2bit(spec, tmp_path / "r.2bit", tmp_path / "q.2bit")
    assert (tmp_path / "r.2bit").read_bytes() == serial["ref.2bit"].read_bytes()
    assert (tmp_path / "q.2bit").read_bytes() == serial["query.2bit"].read_bytes()


def test_workloads_load_and_tiny_materialises(tmp_path):
    workloads = load_workloads()
    assert {"ecoli", "hpylori", "tiny", "S", "M", "L", "batch"} <= set(workloads)
    assert workloads["ecoli"]["kind"] == "real" and workloads["batch"]["queries"] == 20
    batch, medium = workload_spec(workloads, "batch"), workload_spec(workloads, "M")
    assert spec_digest(batch, reference_only=True) == spec_digest(medium, reference_only=True)
    sizes = (workload_spec(workloads, "L").ref_mbp, workload_spec(workloads, "S").query_mbp)
    assert sizes == (500, 10)
    sequence = pytest.importorskip("hspz.io.readers")
    paths = materialise("tiny", tmp_path)
    spec = workload_spec(workloads, "tiny")
    ref, query = simulate_pair(spec)
    assert _same([(r.name, r.seq) for r in sequence.read_records(paths["reference"])], ref)
    assert _same([(r.name, r.seq) for r in sequence.read_records(paths["query"])], query)
    stamp = paths["reference"].stat().st_mtime_ns
    assert materialise("tiny", tmp_path) == paths
    assert paths["reference"].stat().st_mtime_ns == stamp  # cached, not rewritten
