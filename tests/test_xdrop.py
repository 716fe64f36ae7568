"""The x-drop shortcuts are exact: the diagonal sweep, the block bound that rejects hits and the
capped first pass give, hit for hit, what the plain per-hit walk of docs/algorithm.md
("Ungapped x-drop") gives."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hspz.core.scoring import build_matrix
from hspz.io.packing import score_codes
from hspz.stages.xdrop import (
    _bound,
    extend_hits,
    extend_plain,
    extend_seeds,
    first_pass,
    pair_tables,
    pair_view,
    seed_bounds,
)

MAT = build_matrix(910).ravel().astype(np.int32)


def _codes(seq: bytes) -> np.ndarray:
    return score_codes(np.frombuffer(seq + b"&", np.uint8))


def _related(rng, n: int, rate: float) -> tuple[bytes, bytes]:
    a = rng.choice(np.frombuffer(b"ACGT", np.uint8), n)
    b = a.copy()
    mut = rng.random(n) < rate
    b[mut] = rng.choice(np.frombuffer(b"ACGT", np.uint8), int(mut.sum()))
    return bytes(a), bytes(b)


def _plain(ref, qry, R, Q, xdrop=910):
    return extend_plain(ref, qry, len(ref) - 1, len(qry) - 1, MAT, xdrop, R, Q)


@pytest.mark.parametrize("rate", [0.0, 0.02, 0.1, 0.3])
def test_diagonal_sweep_equals_plain_walk_on_dense_anchors(rate):
    rng = np.random.default_rng(int(rate * 100) + 1)
    a, b = _related(rng, 5000, rate)
    ref, qry = _codes(a), _codes(b)
    # every position of the main diagonal, a shifted diagonal, random anchors and duplicates
    R = np.concatenate(
        (
            np.arange(0, 5000, 3),
            np.arange(10, 4000, 7),
            rng.integers(0, 5001, 2000),
            np.full(5, 2500),
        )
    )
    Q = np.concatenate(
        (
            np.arange(0, 5000, 3),
            np.arange(0, 3990, 7),
            rng.integers(0, 5001, 2000),
            np.full(5, 2500),
        )
    )
    got = extend_hits(ref, qry, 5000, 5000, MAT, 910, R, Q)
    want = _plain(ref, qry, R.astype(np.int64), Q.astype(np.int64))
    for g, w in zip(got, want, strict=True):
        assert np.array_equal(g, w)


def test_diagonal_sweep_equals_plain_walk_with_small_xdrop_and_separators():
    rng = np.random.default_rng(5)
    a, b = _related(rng, 3000, 0.05)
    a = a[:1000] + b"&" + a[1001:2000] + b"nnnn" + a[2004:]
    ref, qry = _codes(a), _codes(b)
    R = rng.integers(0, len(a) + 1, 4000)
    Q = np.clip(R + rng.integers(-3, 4, 4000), 0, len(b))
    for xdrop in (5, 100, 910, 5000):
        got = extend_hits(ref, qry, len(a), len(b), build_matrix(xdrop), xdrop, R, Q)
        want = extend_plain(
            ref,
            qry,
            len(a),
            len(b),
            build_matrix(xdrop).ravel().astype(np.int32),
            xdrop,
            R.astype(np.int64),
            Q.astype(np.int64),
        )
        for g, w in zip(got, want, strict=True):
            assert np.array_equal(g, w)


def test_capped_first_pass_plus_sweep_equals_plain_walk_for_every_kept_hit():
    rng = np.random.default_rng(9)
    a, b = _related(rng, 20_000, 0.04)
    ref, qry = _codes(a), _codes(b)
    # fake seeds: each seed's hits are a run of pos_table entries; 500 at random, then 200 of
    # one hit each on the pair's shared diagonal, half of them within CAP of another (long
    # HSPs: walks past the cap, and hits close behind a late one on its diagonal)
    on_diagonal = np.sort(rng.integers(0, 19_000, 100))
    on_diagonal = np.concatenate((on_diagonal, on_diagonal + rng.integers(1, 100, 100)))
    pos_table = np.concatenate((np.sort(rng.integers(0, 19_000, 30_000)), on_diagonal))
    pos_table = pos_table.astype(np.uint32)
    lo = rng.integers(0, 29_000, 500).astype(np.int64)
    counts = rng.integers(0, 40, 500).astype(np.int64)
    counts = np.minimum(counts, 30_000 - lo)
    qpos = rng.integers(0, 19_000, 500).astype(np.int64)
    lo = np.concatenate((lo, 30_000 + np.arange(200)))
    counts = np.concatenate((counts, np.ones(200, np.int64)))
    qpos = np.concatenate((qpos, on_diagonal))
    size, keep_from, seeds = 19, 300, len(lo)
    args = (ref, qry, 20_000, 20_000, build_matrix(910), 910, pos_table, lo, qpos, counts, size)
    (done, _, _, _), (late, _) = first_pass(*args, keep_from)
    assert len(done) > 100 and len(late) > 100  # both paths: early deaths, long HSPs swept
    score, rs, qs, ln = extend_seeds(*args, keep_from)
    R = np.concatenate(
        [pos_table[lo[s] : lo[s] + counts[s]].astype(np.int64) + size for s in range(seeds)]
    )
    Q = np.repeat(qpos + size, counts)
    p = _plain(ref, qry, R, Q)
    keep = p[0] >= keep_from
    want = sorted(zip(*(x[keep].tolist() for x in p), strict=True))
    got = sorted(zip(score.tolist(), rs.tolist(), qs.tolist(), ln.tolist(), strict=True))
    assert got == want


def test_plain_walk_matches_the_spec_on_a_hand_checked_case():
    # ACGTACGTAC against itself from anchor (4, 4): right scores A,C,G,T,A,C = 91+100+100+91+91+100
    # and the left walk scores T,G,C,A backwards: 91+100+100+91.
    seq = b"ACGTACGTAC"
    ref = qry = _codes(seq)
    score, rs, qs, ln = _plain(ref, qry, np.array([4]), np.array([4]))
    assert score.tolist() == [91 + 100 + 100 + 91 + 91 + 100 + 91 + 100 + 100 + 91]
    assert (rs.tolist(), qs.tolist(), ln.tolist()) == ([0], [0], [9])


def _chain_walks(ref, qry, ref_len, qry_len, mat, xdrop, R, Q, direction):
    """finish.cu's chain_walks, one hit at a time (hits in walking order): (merged, best, best
    position, score before the next walk's first base)."""
    n = len(R)
    merged = np.zeros(n, bool)
    best, pos, off = (np.zeros(n, np.int64) for _ in range(3))
    shift = 0 if direction > 0 else 1
    for t in range(n):
        d = R[t] - Q[t]
        lo, hi = max(d, 0), min(qry_len + d, ref_len)
        has_next = t + 1 < n and R[t + 1] - Q[t + 1] == d
        p, f = R[t] - shift, (R[t + 1] - shift if has_next else 0)
        s = m = 0
        best_at = p - direction
        while True:
            if has_next and p == f:
                off[t] = s
            if has_next and (p - f) * direction >= 0 and m == s:
                merged[t] = True
                break
            if p < lo or p >= hi:
                break
            s += mat[ref[p] * 8 + qry[p - d]]
            if s > m:
                m, best_at = s, p
            if m - s > xdrop:
                break
            p += direction
        best[t], pos[t] = m, best_at
    return merged, best, pos, off


@pytest.mark.parametrize("rate", [0.0, 0.02, 0.1, 0.3])
def test_chain_walks_resolved_equal_plain_walks(rate):
    """The GPU's exact shortcut for long HSPs (each hit walks only until it merges into the next
    hit's walk, then `resolve_chains`) gives every hit its plain walks' results: dense hits on
    a diagonal, a shifted one, random hits, duplicates, both sequence ends, N and lowercase."""
    from hspz.stages.xdrop import diagonal_order, resolve_chains

    rng = np.random.default_rng(int(rate * 100) + 7)
    a, b = _related(rng, 3000, rate)
    a = a[:1200] + b"nnnNN" + a[1205:]
    ref, qry = _codes(a), _codes(b)
    R = np.concatenate(
        (
            np.arange(0, 3000, 2),
            np.arange(10, 2000, 5),
            rng.integers(0, 3000, 500),
            np.full(4, 1500),
            [0, 2999],
        )
    )
    Q = np.concatenate(
        (
            np.arange(0, 3000, 2),
            np.arange(0, 1990, 5),
            rng.integers(0, 3000, 500),
            np.full(4, 1500),
            [0, 2999],
        )
    )
    order = diagonal_order(R, Q)
    R, Q = R[order].astype(np.int64), Q[order].astype(np.int64)
    walks = [
        _chain_walks(ref, qry, 3000, 3000, MAT, 910, r, q, step)
        for r, q, step in ((R, Q, 1), (R[::-1], Q[::-1], -1))
    ]
    (mr, at_r), (ml, at_l) = (resolve_chains(np, *w) for w in walks)
    ml, at_l = ml[::-1], at_l[::-1]
    pr, pl = at_r - R, R - at_l
    got = (mr + ml, R - pl, Q - pl, pr + pl)
    assert walks[0][0].sum() > 1000  # most walks merged: the resolution is what is tested
    for g, w in zip(got, _plain(ref, qry, R, Q), strict=True):
        assert np.array_equal(g, w)


# ---------------------------------------------------------------- the bound that rejects hits


def _bases(draw_bytes, n: int) -> bytes:
    """ACGT mostly, with lowercase, N, other bytes and record separators sprinkled in."""
    alphabet = np.frombuffer(b"ACGTACGTACGTACGTacgtNnX&", np.uint8)
    return bytes(alphabet[np.frombuffer(draw_bytes, np.uint8)[:n] % len(alphabet)])


def _plain_side(ref, qry, ref_len, qry_len, mat, xdrop, r, q, step):
    """One side of the walk of docs/algorithm.md ("Ungapped x-drop"), base by base: (best,
    index of the base where the x-drop stopped it or None when the sequence ended first)."""
    s = m = k = 0
    while True:
        p, pq = (r + k, q + k) if step > 0 else (r - 1 - k, q - 1 - k)
        if p < 0 or pq < 0 or p >= ref_len or pq >= qry_len:
            return m, None
        s += int(mat[ref[p] * 8 + qry[pq]])
        m = max(m, s)
        if m - s > xdrop:
            return m, k
        k += 1


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    xdrop=st.sampled_from([1, 40, 200, 910, 3000]),
    rate=st.sampled_from([0.0, 0.05, 0.3, 0.75]),
)
def test_block_bound_stops_only_where_the_walk_has_stopped_and_bounds_its_best(seed, xdrop, rate):
    """`_bound` (two-base blocks, x-drop tested at block ends) claims a stop only when the plain
    walk has stopped at or before that block's last base, and then never under-states its best:
    both directions, every anchor of related and unrelated sequences with N, lowercase, other
    bytes and separators, up to both ends."""
    rng = np.random.default_rng(seed)
    a = _bases(rng.bytes(400), 400)
    mutate = rng.random(400) < rate
    b = bytes(
        np.where(
            mutate, np.frombuffer(_bases(rng.bytes(400), 400), np.uint8), np.frombuffer(a, np.uint8)
        )
    )
    ref, qry = _codes(a), _codes(b[: 300 + int(rng.integers(0, 100))])
    ref_len, qry_len = len(ref) - 1, len(qry) - 1
    mat = build_matrix(xdrop).ravel().astype(np.int32)
    ts, tcr, tcl = pair_tables(mat)
    rp, qp = pair_view(ref), pair_view(qry)
    for r in range(ref_len + 1):
        q = min(max(r + int(rng.integers(-3, 4)), 0), qry_len)
        for step, tc, r0, q0, lim in (
            (2, tcr, r, q, min(ref_len - r, qry_len - q)),
            (-2, tcl, r - 2, q - 2, min(r, q)),
        ):
            blocks = min(lim // 2, 32)
            stopped, bound = _bound(rp, qp, ts, tc, xdrop, r0, q0, step, blocks)
            best, stop_at = _plain_side(ref, qry, ref_len, qry_len, mat, xdrop, r, q, step)
            if stopped:
                assert stop_at is not None and stop_at < 2 * blocks and bound >= best


def test_pair_tables_hold_each_two_base_blocks_score_and_drawdowns():
    mat = build_matrix(910, ambiguous="iupac").ravel().astype(np.int32)
    ts, tcr, tcl = pair_tables(mat)
    seq = np.arange(8, dtype=np.uint8).repeat(8)  # every ordered pair of the 8 codes, twice over
    ref, qry = np.tile(seq, 8), np.repeat(np.arange(8, dtype=np.uint8), 64)
    rp, qp = pair_view(ref), pair_view(qry)
    for p in range(len(ref) - 1):
        i = (int(rp[p]) << 3) | int(qp[p])
        t1, t2 = int(mat[ref[p] * 8 + qry[p]]), int(mat[ref[p + 1] * 8 + qry[p + 1]])
        assert (ts[i], tcr[i], tcl[i]) == (t1 + t2, max(-t2, 0), max(-t1, 0))


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    xdrop=st.sampled_from([50, 910, 2000]),
    keep_from=st.sampled_from([0, 150, 1000, 3000]),
    rate=st.sampled_from([0.0, 0.03, 0.2]),
)
def test_extend_seeds_keeps_exactly_the_plain_walks_hits_at_or_over_keep_from(
    seed, xdrop, keep_from, rate
):
    """The bound, the exact capped walk and the sweep together keep every hit whose plain walks
    score at least keep_from, with the plain walk's score and extent, and no other: hits at
    both ends of both sequences, inside long HSPs, around separators and N runs."""
    rng = np.random.default_rng(seed)
    a, b = _related(rng, 3000, rate)
    a = a[:700] + b"&" + a[701:1500] + b"NNNNN" + a[1505:2600] + b"acgtacgt" + a[2608:]
    ref, qry = _codes(a), _codes(b[:2900])
    pos_table = np.sort(rng.integers(0, 3000 - 19 + 1, 4000)).astype(np.uint32)
    pos_table[:40] = np.arange(40)  # anchors next to the start
    pos_table[-40:] = np.arange(2981 - 40, 2981)  # and next to the end
    n = 300
    lo = rng.integers(0, 3990, n).astype(np.int64)
    lo[:2], lo[-2:] = 0, 3960
    counts = np.minimum(rng.integers(0, 40, n), 4000 - lo).astype(np.int64)
    qpos = rng.integers(0, 2900 - 19 + 1, n).astype(np.int64)
    qpos[:3] = [0, 1, 2900 - 19]
    mat = build_matrix(xdrop)
    got = extend_seeds(ref, qry, 3000, 2900, mat, xdrop, pos_table, lo, qpos, counts, 19, keep_from)
    R = np.concatenate(
        [pos_table[lo[s] : lo[s] + counts[s]].astype(np.int64) + 19 for s in range(n)]
    )
    Q = np.repeat(qpos + 19, counts)
    p = extend_plain(ref, qry, 3000, 2900, mat.ravel().astype(np.int32), xdrop, R, Q)
    keep = p[0] >= keep_from
    assert sorted(zip(*(x.tolist() for x in got), strict=True)) == sorted(
        zip(*(x[keep].tolist() for x in p), strict=True)
    )


@pytest.mark.parametrize("ambiguous", [None, "n,5,1", "iupac,7,100"])
def test_seed_bound_is_at_least_every_left_walks_best_over_the_seeds_bases(ambiguous):
    """seed_bounds, per anchor: no left walk's best over its first `size` bases is higher,
    whatever the reference holds there (every symbol, every anchor, N and IUPAC scored)."""
    rng = np.random.default_rng(3)
    size = 19
    qry = _codes(_bases(rng.bytes(2000), 2000))
    ref = _codes(_bases(rng.bytes(2000), 2000))
    mat = build_matrix(910, ambiguous=ambiguous).ravel().astype(np.int32)
    bound = seed_bounds(qry, mat, size, 1990, size)
    assert len(bound) == 1990 - size + 1
    for q in range(size, 1991):
        for r in rng.integers(size, 2001, 5).tolist():  # reference windows at random
            s = m = 0
            for k in range(1, size + 1):
                s += int(mat[ref[r - k] * 8 + qry[q - k]])
                m = max(m, s)
            assert m <= bound[q - size]
        best = np.maximum(mat.reshape(8, 8).max(axis=0), 0)
        assert bound[q - size] == best[qry[q - size : q]].sum()  # the tightest such bound


@pytest.mark.parametrize("first, last", [(19, 1990), (19, 19), (500, 1999), (30, 29)])
def test_seed_bounds_written_in_place_are_seed_bounds(first, last):
    """The first pass's sliding sum (no temporaries) gives seed_bounds' values exactly."""
    from hspz.stages.xdrop import _best_of, _seed_bounds_into

    rng = np.random.default_rng(first)
    qry = _codes(_bases(rng.bytes(2000), 2000))
    mat = build_matrix(910, ambiguous="iupac,7,100").ravel().astype(np.int32)
    out = np.full(max(last - first + 1, 0), -7, np.int64)
    _seed_bounds_into(qry, _best_of(mat.astype(np.int64).tobytes()), first, 19, out)
    assert out.tolist() == seed_bounds(qry, mat, first, last, 19).tolist()


def test_seed_bound_table_is_seed_bounds_at_every_anchor():
    """The GPU filter's per-anchor table (`seed_bound_table`, here on numpy) holds seed_bounds'
    values for every anchor q >= size, and 0 before."""
    from hspz.stages.xdrop import best_scores, seed_bound_table

    rng = np.random.default_rng(5)
    qry = _codes(_bases(rng.bytes(3000), 3000))[:3000]
    mat = build_matrix(910, ambiguous="iupac,7,100").ravel().astype(np.int32)
    table = seed_bound_table(np, qry, best_scores(mat), 19)
    assert table.dtype == np.uint16 and len(table) == 3001
    assert table[:19].tolist() == [0] * 19
    assert table[19:].tolist() == seed_bounds(qry, mat, 19, 3000, 19).tolist()


def test_seed_bound_table_exact_past_its_running_sums_wrap():
    """Running sums past 2**32 wrap in uint32; each window's difference stays exact (1.5 M codes
    whose terms reach 3,449: the sums wrap once, a window of 19 holds at most 65,531)."""
    from hspz.stages.xdrop import seed_bound_table

    rng = np.random.default_rng(6)
    best = np.array([3449, 3000, 17, 0, 3449, 1, 2, 3448], np.int64)
    codes = rng.integers(0, 8, 1_500_000).astype(np.uint8)
    codes[:1_300_000] = 0  # most terms at the top: the running sum passes 2**32 by 1.3 M
    table = seed_bound_table(np, codes, best, 19)
    run = np.concatenate(([0], np.cumsum(best[codes])))
    assert int(run[-1]) > 2**32
    assert (table[19:].astype(np.int64) == run[19:] - run[:-19]).all()


def test_pair_tables_widen_to_int64_for_a_huge_xdrop():
    """Two separator scores (-10 x-drop each) past int32 still add up exactly in a block."""
    mat = build_matrix(200_000_000).ravel().astype(np.int64)
    ts, _, _ = pair_tables(mat)
    assert ts.dtype == np.int64 and ts.min() == 2 * mat.min() == -4_000_000_000
    assert pair_tables(build_matrix(910))[0].dtype == np.int32


@pytest.mark.parametrize("rate", [0.0, 0.01, 0.08])
def test_extend_seeds_of_a_real_seed_stream_equals_the_plain_walk(rate):
    """A real seed stream of two related sequences (long HSPs: every window hits the same
    diagonal, so hits follow each other there and skip their walks; a repeat; N runs): the
    kept hits equal the plain walk's, hit for hit."""
    from hspz.io.packing import seed_codes
    from hspz.stages.seed import SeedShape, build_seed_table, hit_seeds

    rng = np.random.default_rng(int(rate * 1000) + 2)
    a, b = _related(rng, 30_000, rate)
    a = a[:20_000] + a[5_000:6_000] + b"NNNNNNNNNN" + a[20_000:]  # a repeat and an N run
    buf_a, buf_b = np.frombuffer(a + b"&", np.uint8), np.frombuffer(b + b"&", np.uint8)
    ref, qry = score_codes(buf_a), score_codes(buf_b)
    shape = SeedShape.from_pattern("TTT0T00TT00T0T0TTTT")
    table = build_seed_table(seed_codes(buf_a), len(a), shape, 1)
    _, qpos, lo, counts, _, _ = hit_seeds(seed_codes(buf_b), shape, 0, len(b), True, table)
    mat = build_matrix(910)
    got = extend_seeds(
        ref, qry, len(a), len(b), mat, 910, table.pos_table, lo, qpos, counts, shape.size, 3000
    )
    R = (
        np.concatenate(
            [table.pos_table[x : x + c].astype(np.int64) for x, c in zip(lo, counts, strict=True)]
        )
        + shape.size
    )
    Q = np.repeat(qpos + shape.size, counts)
    p = extend_plain(ref, qry, len(a), len(b), mat.ravel().astype(np.int32), 910, R, Q)
    keep = p[0] >= 3000
    assert sorted(zip(*(x.tolist() for x in got), strict=True)) == sorted(
        zip(*(x[keep].tolist() for x in p), strict=True)
    )
    diag = R - Q
    order = np.lexsort((Q, diag))
    follows = (np.diff(diag[order]) == 0) & (np.diff(Q[order]) <= 128)
    assert follows.sum() > 10_000 and keep.sum() > 1000  # hits that follow others on a diagonal
