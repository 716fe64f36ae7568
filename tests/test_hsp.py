"""The entropy gate, containment dedup and final order (hspz/stages/hsp.py) against independent
Python (docs/algorithm.md, "Entropy" and "Dedup and order")."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from hspz.stages import hsp
from hspz.stages.hsp import HSP_DTYPE, dedup, diagonal_permutation, gate

LN4_F32 = float(np.float32(math.log(4.0)))
U32 = 0xFFFFFFFF


def _entropy(ref, qry, rs, qs, ln) -> float:
    counts = [0, 0, 0, 0]
    for k in range(ln + 1):
        r = int(ref[rs + k])
        if r < 4 and r == int(qry[qs + k]):
            counts[r] += 1
    if sum(counts) < 20:
        return 1.0
    s = 0.0
    for c in counts:  # A, C, G, T order
        if c:
            p = c / (ln + 1)
            s += p * math.log(p)
    return -s / LN4_F32


def _gate_rows(ref, qry, total, rs, qs, ln, thresh, entropy, with_total=False):
    """[(ref_start, query_start, len, score)] of the rows that pass, computed row by row (each
    followed by its total before the gate, `with_total`)."""
    out = []
    for t, r, q, n in zip(total.tolist(), rs.tolist(), qs.tolist(), ln.tolist(), strict=True):
        ent = _entropy(ref, qry, r, q, n) if entropy and thresh <= t <= 3 * thresh else 1.0
        if math.trunc(float(np.float32(t)) * ent) >= thresh:
            out.append((r, q, n, math.trunc(t * ent), *((t,) if with_total else ())))
    return out


def _as_rows(h):
    return [
        (int(a), int(b), int(c), int(d))
        for a, b, c, d in zip(h["ref_start"], h["query_start"], h["len"], h["score"], strict=True)
    ]


def _sequences(seed: int, n: int = 4000):
    """Score codes (0..7) with low-complexity stretches; the query shares most of the reference."""
    rng = np.random.default_rng(seed)
    ref = rng.integers(0, 4, n).astype(np.uint8)
    ref[500:900] = 0  # poly-A
    ref[1200:1600] = np.tile([0, 3], 200)  # AT repeat
    ref[2000:2300] = rng.choice([1, 2], 300)  # GC only
    ref[rng.integers(0, n, 80)] = rng.integers(4, 8, 80)  # L, N, X, E sprinkled in
    qry = ref.copy()
    mutate = rng.random(n) < 0.15
    qry[mutate] = rng.integers(0, 8, int(mutate.sum()))
    return ref, qry


def _random_hsps(rng: np.random.Generator, n_seq: int, count: int, thresh: int):
    ln = rng.integers(0, 400, count)
    rs = rng.integers(0, n_seq - 401, count)
    qs = np.where(rng.random(count) < 0.7, rs, rng.integers(0, n_seq - 401, count))
    total = rng.integers(thresh - 100, 3 * thresh + 100, count)
    edges = rng.random(count) < 0.1
    total[edges] = rng.choice([thresh - 1, thresh, 3 * thresh, 3 * thresh + 1], int(edges.sum()))
    return total.astype(np.int64), rs.astype(np.int64), qs.astype(np.int64), ln.astype(np.int64)


@pytest.mark.parametrize("entropy", [True, False])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_gate_equals_an_independent_float64_entropy_gate(seed, entropy):
    ref, qry = _sequences(seed)
    rng = np.random.default_rng(seed + 100)
    thresh = 3000
    total, rs, qs, ln = _random_hsps(rng, len(ref), 3000, thresh)
    got = gate(ref, qry, total, rs, qs, ln, thresh, entropy)
    assert got.dtype == HSP_DTYPE
    expected = _gate_rows(ref, qry, total, rs, qs, ln, thresh, entropy)
    assert _as_rows(got) == expected
    kept = _gate_rows(ref, qry, total, rs, qs, ln, thresh, entropy, with_total=True)
    lost = sum(score < t for _, _, _, score, t in kept)  # each kept row against its own total
    assert (lost > 0) == entropy  # the entropy really bit: some rows lost score
    if entropy:  # and some were dropped
        assert len(expected) < len(_gate_rows(ref, qry, total, rs, qs, ln, thresh, False))


def test_gate_shares_entropy_across_duplicate_rows_exactly_as_computing_it_per_row():
    ref, qry = _sequences(7)
    rng = np.random.default_rng(8)
    thresh = 3000
    total, rs, qs, ln = _random_hsps(rng, len(ref), 60, thresh)
    reps = rng.integers(1, 40, 60)  # each distinct HSP many times, with different totals
    idx = rng.permutation(np.repeat(np.arange(60), reps))
    rs, qs, ln = rs[idx], qs[idx], ln[idx]
    total = rng.integers(thresh - 500, 3 * thresh + 500, len(idx)).astype(np.int64)
    # near collisions: same (ref_start, query_start) with another len, swapped starts
    rs = np.concatenate((rs, rs[:50], qs[:50]))
    qs = np.concatenate((qs, qs[:50], rs[:50]))
    ln = np.concatenate((ln, (ln[:50] + 1) % 400, ln[:50]))
    total = np.concatenate((total, total[:50], total[:50]))
    got = gate(ref, qry, total, rs, qs, ln, thresh, True)
    one_by_one = [
        row
        for i in range(len(total))
        for row in _as_rows(
            gate(
                ref,
                qry,
                total[i : i + 1],
                rs[i : i + 1],
                qs[i : i + 1],
                ln[i : i + 1],
                thresh,
                True,
            )
        )
    ]
    assert _as_rows(got) == one_by_one
    assert _as_rows(got) == _gate_rows(ref, qry, total, rs, qs, ln, thresh, True)
    assert len(total) > 1000


def test_entropy_needs_at_least_20_exact_matches():
    ref = np.tile(np.array([0, 1, 2, 3], np.uint8), 5)  # 20 positions, 5 of each base
    ent = 1.0 / (LN4_F32 / math.log(4.0))  # uniform composition: ln 4 / float32(ln 4), just < 1
    assert _entropy(ref, ref, 0, 0, 19) == pytest.approx(ent, abs=1e-15)
    args = (np.array([2500]), np.array([0]), np.array([0]), np.array([19]))
    assert _as_rows(gate(ref, ref, *args, 1000, True)) == [(0, 0, 19, 2499)]  # 20 matches
    qry = ref.copy()
    qry[7] = 0  # 19 matches: entropy is 1
    assert _as_rows(gate(ref, qry, *args, 1000, True)) == [(0, 0, 19, 2500)]


def _run_of(n_match: int, n_total: int):
    """A poly-A HSP of n_total + 1 positions with exactly n_match exact matches."""
    ref = np.zeros(n_total + 1, np.uint8)
    qry = np.full(n_total + 1, 1, np.uint8)  # A vs C: no match
    qry[:n_match] = 0
    return ref, qry


def test_only_lowercase_free_acgt_matches_count_towards_entropy():
    ref = np.array([4] * 30 + [5] * 30, np.uint8)  # L and N matching themselves
    got = gate(
        ref, ref.copy(), np.array([1500]), np.array([0]), np.array([0]), np.array([59]), 1000, True
    )
    assert _as_rows(got) == [(0, 0, 59, 1500)]


def test_entropy_applies_only_from_k_to_3k_inclusive():
    ref, qry = _run_of(60, 99)  # all-A matches: entropy 0 -> score 0 inside the range
    k = 1000
    rows = gate(
        ref,
        qry,
        np.array([k - 1, k, 3 * k, 3 * k + 1]),
        np.zeros(4, np.int64),
        np.zeros(4, np.int64),
        np.full(4, 99),
        k,
        True,
    )
    assert _as_rows(rows) == [(0, 0, 99, 3 * k + 1)]
    rows = gate(
        ref,
        qry,
        np.array([k - 1, k, 3 * k, 3 * k + 1]),
        np.zeros(4, np.int64),
        np.zeros(4, np.int64),
        np.full(4, 99),
        k,
        False,
    )
    assert [r[3] for r in _as_rows(rows)] == [k, 3 * k, 3 * k + 1]


def test_keep_uses_float32_total_while_the_stored_score_uses_the_exact_total():
    ref = np.tile(np.array([0, 0, 0, 1], np.uint8), 10)  # 30 A + 10 C matches: 0 < ent < 1
    ent = _entropy(ref, ref, 0, 0, 39)
    assert 1 / 3 < ent < 1
    found = 0
    for t in range(2**24 + 1, 2**24 + 4001, 2):  # odd: float32(t) = t - 1 or t + 1
        f32 = float(np.float32(t))
        k = math.trunc(t * ent)
        if math.trunc(f32 * ent) < k <= 3 * k and t <= 3 * k:
            args = (np.array([t]), np.array([0]), np.array([0]), np.array([39]))
            assert _as_rows(gate(ref, ref, *args, k, True)) == []  # float32 total misses K
            kept = gate(ref, ref, *args, k - 1, True)
            assert _as_rows(kept) == [(0, 0, 39, math.trunc(t * ent))]
            found += 1
    assert found > 10


def test_entropy_divides_by_ln4_rounded_to_float32():
    ref = np.tile(np.array([0, 0, 0, 1, 2], np.uint8), 8)
    ent32 = _entropy(ref, ref, 0, 0, 39)
    s = -sum(p * math.log(p) for p in (24 / 40, 8 / 40, 8 / 40))
    assert ent32 == s / LN4_F32
    found = 0
    for t in range(5_000_000, 5_003_000):
        if math.trunc(t * s / LN4_F32) != math.trunc(t * s / math.log(4.0)):
            got = gate(
                ref, ref, np.array([t]), np.array([0]), np.array([0]), np.array([39]), t // 2, True
            )
            assert _as_rows(got) == [(0, 0, 39, math.trunc(t * ent32))]
            found += 1
    assert found > 10


# --------------------------------------------------------------------------------------------
# Dedup and order
# --------------------------------------------------------------------------------------------


def _records(rows) -> np.ndarray:
    h = np.zeros(len(rows), HSP_DTYPE)
    for i, (r, q, n, s) in enumerate(rows):
        h[i] = (r, q, n, s)
    return h


def _diag(row) -> int:
    return (row[0] - row[1]) & U32


def _brute_dedup(rows):
    s = sorted(rows, key=lambda x: (_diag(x), x[0], x[2], -x[3]))  # stable
    kept = []
    for i, x in enumerate(s):
        if i > 0:
            p = s[i - 1]
            a0, a1, b0, b1 = x[0], x[0] + x[2], p[0], p[0] + p[2]
            if _diag(x) == _diag(p) and ((b0 <= a0 and a1 <= b1) or (a0 <= b0 and b1 <= a1)):
                continue
        kept.append(x)
    return sorted(kept, key=lambda x: (x[1], x[0], x[2], -x[3]))


def _random_rows(rng: random.Random, n: int):
    rows = []
    diags = [rng.randint(-300, 300) for _ in range(rng.randint(1, 6))]
    for _ in range(n):
        d = rng.choice(diags)
        r = rng.randint(max(d, 0), max(d, 0) + 200)
        q = r - d
        rows.append((r, q, rng.randint(0, 80), rng.randint(3000, 3010)))
    rows += rng.sample(rows, min(len(rows), rng.randint(0, 5)))  # exact duplicates
    rng.shuffle(rows)
    return rows


def test_dedup_equals_brute_force_on_random_hsp_sets():
    rng = random.Random(41)
    dropped = 0
    for _ in range(600):
        rows = _random_rows(rng, rng.randint(1, 40))
        got = _as_rows(dedup(_records(rows)))
        expected = _brute_dedup(rows)
        assert got == expected, rows
        dropped += len(rows) - len(expected)
    assert dropped > 1000


def test_containment_is_checked_against_the_previous_sorted_element_not_the_last_kept():
    # sorted on one diagonal: A [0, 100], B [10, 20] (inside A: dropped), C [30, 90]: C lies
    # inside A but not inside its predecessor B, so C stays
    a, b, c = (0, 0, 100, 5000), (10, 10, 10, 5000), (30, 30, 60, 5000)
    assert _as_rows(dedup(_records([c, b, a]))) == [a, c]
    # A [0, 10] kept, B [0, 50] contains A: dropped, C [20, 30] inside B (not A): dropped
    a, b, c = (0, 0, 10, 5000), (0, 0, 50, 5000), (20, 20, 10, 5000)
    assert _as_rows(dedup(_records([b, c, a]))) == [a]


def test_equal_start_and_equal_span_rows_keep_the_highest_score_once():
    rows = [(10, 4, 30, 3100), (10, 4, 30, 3900), (10, 4, 30, 3500), (10, 4, 20, 4000)]
    # sorted: len 20 first, then len 30 by score descending; every later row contains the first
    assert _as_rows(dedup(_records(rows))) == [(10, 4, 20, 4000)]


def test_other_diagonals_never_count_as_containing():
    rows = [(10, 10, 50, 3000), (11, 10, 5, 3000), (20, 21, 5, 3000)]
    assert _as_rows(dedup(_records(rows))) == sorted(rows, key=lambda x: (x[1], x[0]))


def test_diagonal_permutation_compares_the_wrapping_u32_diagonal_unsigned():
    rows = [
        (0, 5, 10, 3000),
        (10, 0, 10, 3000),
        (3, 3, 10, 3000),
        (2**31 + 7, 0, 3, 3000),
        (0, 2**31 + 7, 4, 3000),
        (7, 8, 1, 3000),
        (7, 8, 1, 3100),
    ]
    got = _as_rows(_by_diagonal(_records(rows)))
    assert got == sorted(rows, key=lambda x: (_diag(x), x[0], x[2], -x[3]))
    assert got[0] == (3, 3, 10, 3000)  # diagonal 0 first
    assert got.index((10, 0, 10, 3000)) < got.index((0, 5, 10, 3000))  # -5 is 2^32 - 5 > 10
    assert got[-2:] == [(7, 8, 1, 3100), (7, 8, 1, 3000)]  # -1 last; score descending
    rng = random.Random(2)
    for _ in range(50):
        rows = [
            (
                rng.randint(0, 2**32 - 1),
                rng.randint(0, 2**32 - 1),
                rng.randint(0, 9),
                rng.randint(0, 5),
            )
            for _ in range(30)
        ]
        got = _as_rows(_by_diagonal(_records(rows)))
        assert got == sorted(rows, key=lambda x: (_diag(x), x[0], x[2], -x[3]))


def _by_diagonal(h: np.ndarray) -> np.ndarray:
    return h[diagonal_permutation(h)]


def test_dedup_of_nothing_is_nothing():
    assert len(dedup(np.zeros(0, HSP_DTYPE))) == 0


def _match_counts(ref, qry, total, rs, qs, ln, hspthresh):
    """What the GPU's match_counts kernel gives, the plain way."""
    counts = np.zeros((len(total), 4), np.int64)
    for i in np.flatnonzero((total >= hspthresh) & (total <= 3 * hspthresh)):
        r, q = ref[rs[i] : rs[i] + ln[i] + 1], qry[qs[i] : qs[i] + ln[i] + 1]
        counts[i] = np.bincount(r[(r < 4) & (r == q)], minlength=4)
    return counts


@pytest.mark.parametrize("seed", range(6))
def test_gate_by_counts_equals_the_gate(seed):
    """The GPU's gate (entropy from device match counts, numpy, math.log per distinct p) gives
    the CPU gate's records and scores, over random sequences and scores around the band."""
    rng = np.random.default_rng(seed)
    ref = rng.integers(0, 6, 6000).astype(np.uint8)  # with lowercase (4) and N (5)
    qry = ref.copy()
    mutated = rng.random(len(ref)) < rng.uniform(0.05, 0.6)
    qry[mutated] = rng.integers(0, 6, int(mutated.sum()))
    n = 2000
    ln = rng.integers(0, 300, n)
    rs = rng.integers(0, len(ref) - 301, n)
    qs = np.clip(rs + rng.integers(-3, 4, n), 0, len(ref) - 301)
    total = rng.integers(1500, 11000, n)
    counts = _match_counts(ref, qry, total, rs, qs, ln, 3000)
    seen = {}
    for entropy in (True, False):
        want = gate(ref, qry, total, rs, qs, ln, 3000, entropy)
        got, kept = hsp.gate_by_counts(total, rs, qs, ln, counts, 3000, entropy)
        assert got.tobytes() == want.tobytes() and kept.sum() == len(got)
        seen[entropy] = got.tobytes()
    assert seen[True] != seen[False]  # entropy changed scores here: the comparison saw it


def test_collapsed_hits_settle_to_the_same_chunk_output():
    """Identical hits collapsed with their copies and settled several chunks at once (as the
    GPU backend does) give each chunk the counts, HSPs and raw dump of its hits one by one."""
    from hspz.core.options import Options
    from hspz.engine.contract import Context, settle, settle_chunks

    rng = np.random.default_rng(8)
    ref = rng.integers(0, 4, 5000).astype(np.uint8)
    qry = ref.copy()
    n = 3000
    rs = rng.integers(0, 40, n).astype(np.int64) * 50  # few distinct starts: many copies
    qs = rs + rng.integers(-2, 3, n) + 100
    qs = np.clip(qs, 0, 4000)
    ln = rng.integers(1, 4, n).astype(np.int64) * 100
    total = (rs % 7) * 700 + ln * 10  # a function of (rs, qs, len), as real scores are
    chunk = (rs // 50 % 3 == 0) + 2 * (qs > 1000)  # chunks 0..3, none of 4; a function of the row
    _, first, copies = np.unique(
        np.stack((chunk, rs, qs, ln)), axis=1, return_index=True, return_counts=True
    )
    cols = [c[first] for c in (total, rs, qs, ln)]
    counts = _match_counts(ref, qry, *cols, 3000)
    assert len(first) < n // 4 and copies.sum() == n
    for keep_raw in (False, True):
        ctx = Context.from_options(Options(), keep_raw=keep_raw)
        gated, keep = hsp.gate_by_counts(*cols, counts, 3000, True)
        folded = settle_chunks(ctx, gated, copies[keep], chunk[first][keep], 5)
        assert len(folded) == 5 and folded[4][0] == 0 and len(folded[4][2]) == 0
        for c in range(4):
            mine = chunk == c
            plain = settle(ctx, gate(ref, qry, *(x[mine] for x in (total, rs, qs, ln)), 3000, True))
            assert plain[0] == folded[c][0] > 0
            assert np.array_equal(plain[2], folded[c][2])
            if keep_raw:
                assert plain[1].tobytes() == folded[c][1].tobytes()
            else:
                assert plain[1] is None and folded[c][1] is None


def test_collapse_counts_identical_records_and_settles_like_the_records_themselves():
    """hsp.collapse (the CPU backend's, per piece and again per chunk): distinct records with
    their copies, whose settle gives the chunk's counts, raw dump and survivors; records that
    differ in score alone stay apart; pieces collapsed one by one and then together give the
    same."""
    from hspz.core.options import Options
    from hspz.engine.contract import Context, settle, settle_chunks

    rng = random.Random(5)
    for trial in range(60):
        rows = _random_rows(rng, rng.randint(0, 60))
        rows += [r for r in rows if rng.random() < 0.5] * rng.randint(0, 3)  # many copies
        rows += [(r[0], r[1], r[2], r[3] + 1) for r in rows[:2]]  # same span, other score
        rng.shuffle(rows)
        h = _records(rows)
        distinct, copies = hsp.collapse(h)
        assert copies.sum() == len(h) and len(set(_as_rows(distinct))) == len(distinct)
        assert sorted(_as_rows(np.repeat(distinct, copies))) == sorted(_as_rows(h))
        cut = rng.randint(0, len(h))
        parts = [hsp.collapse(h[:cut]), hsp.collapse(h[cut:])]
        again = hsp.collapse(
            np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        )
        for keep_raw in (False, True):
            ctx = Context.from_options(Options(), keep_raw=keep_raw)
            want = settle(ctx, h)
            for d, c in ((distinct, copies), again):
                got = settle_chunks(ctx, d, c, np.zeros(len(d), np.int64), 1)[0]
                assert got[0] == want[0] == len(h)
                assert got[2].tobytes() == want[2].tobytes(), trial
                if keep_raw:
                    assert got[1].tobytes() == want[1].tobytes()
