"""Ungapped x-drop extension of seed hits (docs/algorithm.md, "Ungapped x-drop"), two exact
ways.

`extend_plain` walks every hit on its own, exactly as docs/algorithm.md reads: the readable
reference.
`extend_hits` gives the same answers but walks each diagonal stretch once.  Why that is exact:
on one diagonal, two walks that have passed the same base add the same scores from then on, so
their drop below their own maximum ("drawdown") differs only by how far apart their maxima are.
The moment two walks have equal maxima (in absolute prefix-sum terms) they have equal drawdowns
and therefore stop at the same base, gain the same further maximum and move their best position
together; one of them can stop walking and copy the other's outcome.  A new hit whose start lies
on a walk sitting at its maximum is that case at its first base.  The sweep keeps a stack of
distinct walks (maxima strictly decreasing from oldest to newest), merges walks whose maxima meet
and retires the oldest once its drawdown passes x-drop.

Anchors are the first base after the seed.  Right walks score anchor, anchor+1, ... (best position
starts at -1); left walks score anchor-1, anchor-2, ... (best position counted in steps, starts
at 0).
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

import numpy as np

from hspz.core.jit import njit, prefetch


@njit(inline="always")
def _sub(ref, qry, mat, p, diag):
    return mat[ref[p] * 8 + qry[p - diag]]


@njit
def walk_right(ref, qry, ref_len, qry_len, mat, xdrop, r, q):
    """(best score, best step or -1) of the right walk from anchor (r, q)."""
    s = 0
    m = 0
    pos = -1
    k = 0
    while r + k < ref_len and q + k < qry_len:
        s += mat[ref[r + k] * 8 + qry[q + k]]
        if s > m:
            m = s
            pos = k
        if m - s > xdrop:
            break
        k += 1
    return m, pos


@njit
def walk_left(ref, qry, mat, xdrop, r, q):
    """(best score, best step or 0) of the left walk from anchor (r, q)."""
    s = 0
    m = 0
    pos = 0
    k = 1
    lim = min(r, q)
    while k <= lim:
        s += mat[ref[r - k] * 8 + qry[q - k]]
        if s > m:
            m = s
            pos = k
        if m - s > xdrop:
            break
        k += 1
    return m, pos


@njit
def extend_plain(ref, qry, ref_len, qry_len, mat, xdrop, R, Q):  # mat: flat 8x8
    """Every hit walked on its own: (score, ref_start, query_start, len) per anchor."""
    n = len(R)
    score = np.empty(n, np.int64)
    rs = np.empty(n, np.int64)
    qs = np.empty(n, np.int64)
    ln = np.empty(n, np.int64)
    for i in range(n):
        mr, pr = walk_right(ref, qry, ref_len, qry_len, mat, xdrop, R[i], Q[i])
        ml, pl = walk_left(ref, qry, mat, xdrop, R[i], Q[i])
        score[i] = mr + ml
        rs[i] = R[i] - pl
        qs[i] = Q[i] - pl
        ln[i] = pr + pl
    return score, rs, qs, ln


@njit
def _sweep(ref, qry, mat, xdrop, diag, first, direction, lo_bound, hi_bound, out_m, out_p):
    """Walk one diagonal once for anchors whose first scored bases are `first` (traversal order).

    `direction` is +1 (right walks) or -1 (left walks); positions outside [lo_bound, hi_bound)
    end every walk.  Writes each anchor's best score and the absolute position of its maximum
    (first - direction when no base raised it).
    """
    n = len(first)
    st_id = np.empty(n, np.int64)  # stack of live walks, oldest at `bot`
    st_max = np.empty(n, np.int64)
    st_pos = np.empty(n, np.int64)
    base = np.empty(n, np.int64)
    parent = np.full(n, -1, np.int64)
    merge_max = np.empty(n, np.int64)
    fin_max = np.empty(n, np.int64)
    fin_pos = np.empty(n, np.int64)
    events = np.empty(n, np.int64)
    n_events = 0
    bot = 0
    top = 0  # exclusive
    g = 0
    i = 0
    p = first[0]
    while i < n or top > bot:
        if top == bot and (p - first[i]) * direction < 0:
            p = first[i]
        while i < n and first[i] == p:
            base[i] = g
            if top > bot and st_max[top - 1] == g:
                parent[i] = st_id[top - 1]
                merge_max[i] = g
                fin_pos[i] = p - direction
                events[n_events] = i
                n_events += 1
            else:
                st_id[top] = i
                st_max[top] = g
                st_pos[top] = p - direction
                top += 1
            i += 1
        if p < lo_bound or p >= hi_bound:
            for j in range(bot, top):
                fin_max[st_id[j]] = st_max[j]
                fin_pos[st_id[j]] = st_pos[j]
            bot = top
            if i < n:
                p = first[i]
            continue
        g += _sub(ref, qry, mat, p, diag)
        keep = top
        while keep > bot and st_max[keep - 1] <= g:
            keep -= 1
            if st_max[keep] < g:
                st_max[keep] = g
                st_pos[keep] = p
        if top - keep > 1:
            for j in range(keep + 1, top):
                c = st_id[j]
                parent[c] = st_id[keep]
                merge_max[c] = g
                fin_pos[c] = st_pos[j]
                events[n_events] = c
                n_events += 1
            top = keep + 1
        while top > bot and st_max[bot] - g > xdrop:
            fin_max[st_id[bot]] = st_max[bot]
            fin_pos[st_id[bot]] = st_pos[bot]
            bot += 1
        p += direction
    for e in range(n_events - 1, -1, -1):
        c = events[e]
        s = parent[c]
        if fin_max[s] > merge_max[c]:
            fin_pos[c] = fin_pos[s]
        fin_max[c] = fin_max[s]
    for j in range(n):
        out_m[j] = fin_max[j] - base[j]
        out_p[j] = fin_pos[j]


@njit
def _extend_groups(ref, qry, ref_len, qry_len, mat, xdrop, R, Q, diag, starts):
    """Right and left sweeps for every diagonal group; R sorted ascending inside a group."""
    n = len(R)
    mr = np.empty(n, np.int64)
    pr = np.empty(n, np.int64)
    ml = np.empty(n, np.int64)
    pl = np.empty(n, np.int64)
    for g in range(len(starts) - 1):
        a, b = starts[g], starts[g + 1]
        d = diag[a]
        if b - a == 1:
            mr[a], pr[a] = walk_right(ref, qry, ref_len, qry_len, mat, xdrop, R[a], Q[a])
            ml[a], pl[a] = walk_left(ref, qry, mat, xdrop, R[a], Q[a])
            continue
        hi = min(ref_len, qry_len + d)
        lo = max(0, d)
        first = R[a:b].copy()
        _sweep(ref, qry, mat, xdrop, d, first, 1, lo, hi, mr[a:b], pr[a:b])
        for j in range(a, b):
            pr[j] -= R[j]
        first = R[a:b][::-1] - 1
        m_rev = np.empty(b - a, np.int64)
        p_rev = np.empty(b - a, np.int64)
        _sweep(ref, qry, mat, xdrop, d, first, -1, lo, hi, m_rev, p_rev)
        for j in range(b - a):
            k = b - 1 - j
            ml[k] = m_rev[j]
            pl[k] = R[k] - p_rev[j]
    return mr, pr, ml, pl


def extend_hits(
    ref: np.ndarray,
    qry: np.ndarray,
    ref_len: int,
    qry_len: int,
    mat: np.ndarray,
    xdrop: int,
    R: np.ndarray,
    Q: np.ndarray,
) -> tuple[np.ndarray, ...]:
    """Same results as `extend_plain`, walking each diagonal stretch once (sorts by diagonal)."""
    R = np.ascontiguousarray(R, np.int64)
    Q = np.ascontiguousarray(Q, np.int64)
    return _in_hit_order(ref, qry, ref_len, qry_len, _flat32(mat), int(xdrop), R, Q)


@njit
def _in_hit_order(ref, qry, ref_len, qry_len, mat, xdrop, R, Q):
    """`extend_hits` in one compiled call: sorted by diagonal, swept, put back in R's order."""
    n = len(R)
    score = np.empty(n, np.int64)
    rs = np.empty(n, np.int64)
    qs = np.empty(n, np.int64)
    ln = np.empty(n, np.int64)
    if n == 0:
        return score, rs, qs, ln
    order = _diagonal_order(R, Q)
    Rs = R[order]
    Qs = Q[order]
    starts = _group_starts(Rs - Qs)
    s, a, b, c = _sorted_sweep(ref, qry, ref_len, qry_len, mat, xdrop, Rs, Qs, starts)
    for k in range(n):
        i = order[k]
        score[i], rs[i], qs[i], ln[i] = s[k], a[k], b[k], c[k]
    return score, rs, qs, ln


@njit
def _late_sweep(ref, qry, ref_len, qry_len, mat, xdrop, R, Q, keep_from, score, rs, qs, ln, n):
    """`extend_hits` of R, Q, the rows scoring at least keep_from appended in R's order after
    row n of (score, rs, qs, ln); returns the rows there then."""
    s, a, b, c = _in_hit_order(ref, qry, ref_len, qry_len, mat, xdrop, R, Q)
    for i in range(len(R)):
        if s[i] >= keep_from:
            score[n], rs[n], qs[n], ln[n] = s[i], a[i], b[i], c[i]
            n += 1
    return n


def diagonal_order(R: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """Permutation sorting hits by (diagonal, R), stable: one int64 key when the ranges allow it."""
    return _diagonal_order(np.ascontiguousarray(R, np.int64), np.ascontiguousarray(Q, np.int64))


@njit
def _diagonal_order(R, Q):
    diag = R - Q
    lo, hi, span = diag.min(), diag.max(), R.max() + 1
    if hi - lo + 1 <= (2**62 - 1) // span:  # (hi - lo + 1) * span < 2**62, without overflow
        return np.argsort((diag - lo) * span + R, kind="mergesort")
    by_r = np.argsort(R, kind="mergesort")  # then by diagonal: a stable sort keeps R's order
    return by_r[np.argsort(diag[by_r], kind="mergesort")]


def diagonal_starts(diag: np.ndarray) -> np.ndarray:
    """Group boundaries of a diagonal-sorted array (first index of each group, then len)."""
    return _group_starts(np.ascontiguousarray(diag, np.int64))


@njit
def _group_starts(diag):
    n = len(diag)
    starts = np.empty(n + 1, np.int64)
    g = 0
    for i in range(n + 1):
        if i == 0 or i == n or diag[i] != diag[i - 1]:
            starts[g] = i
            g += 1
    return starts[:g]


def extend_sorted(
    ref: np.ndarray,
    qry: np.ndarray,
    ref_len: int,
    qry_len: int,
    mat: np.ndarray,
    xdrop: int,
    Rs: np.ndarray,
    Qs: np.ndarray,
    starts: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Extension of hits already sorted by (diagonal, R); results in that order."""
    Rs, Qs = np.ascontiguousarray(Rs, np.int64), np.ascontiguousarray(Qs, np.int64)
    return _sorted_sweep(ref, qry, ref_len, qry_len, _flat32(mat), int(xdrop), Rs, Qs, starts)


@njit
def _sorted_sweep(ref, qry, ref_len, qry_len, mat, xdrop, Rs, Qs, starts):
    mr, pr, ml, pl = _extend_groups(ref, qry, ref_len, qry_len, mat, xdrop, Rs, Qs, Rs - Qs, starts)
    return mr + ml, Rs - pl, Qs - pl, pr + pl


def _flat32(mat: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(mat, np.int32).ravel()


CAP = 128  # bases a side a first walk may take before a hit is handed to the diagonal sweep
AHEAD = 8  # hits gathered (their reference bases prefetched) before the walks that use them
SEEDS_AHEAD = 8  # seeds whose pos_table entries are prefetched before they are read
RECENT = 4096  # diagonals remembered with their last late hit (a direct-mapped table)


def pair_view(codes: np.ndarray) -> np.ndarray:
    """Overlapping uint16 pairs of score codes, no copy: view[p] = codes[p] | codes[p + 1] << 8."""
    codes = np.ascontiguousarray(codes, np.uint8)
    return np.ndarray((max(len(codes) - 1, 0),), np.uint16, codes, 0, (1,))


def pair_tables(mat: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two-base blocks of a walk, indexed by `pair_view(ref)[p] << 3 | pair_view(qry)[p']`:
    (the block's score; the drawdown after it, from none before it, walking right (base p
    first); the same walking left (base p + 1 first)).  With t2 the block's second score, the
    drawdown after it is max(drawdown before - score, -t2, 0) (one step: max(d - t, 0))."""
    m = np.asarray(mat, np.int64).reshape(8, 8)
    a, b, c, d = np.meshgrid(*(np.arange(8),) * 4, indexing="ij")  # ref p, p + 1; qry p', p' + 1
    at = ((a | b << 8) << 3 | (c | d << 8)).ravel()
    fits = 2 * int(np.abs(m).max()) < 2**31  # a block's score: two, down to -10 x-drop each
    ts, tcr, tcl = (np.zeros(1 << 14, np.int32 if fits else np.int64) for _ in range(3))
    ts[at] = (m[a, c] + m[b, d]).ravel()
    tcr[at] = np.maximum(-m[b, d], 0).ravel()
    tcl[at] = np.maximum(-m[a, c], 0).ravel()
    return ts, tcr, tcl


@njit
def _gather(pos_table, lo, qpos, counts, size, s, j, rb, qb, row, ref):
    """Up to AHEAD hits from seed s, hit j on, into rb[row], qb[row] (anchors), prefetching the
    bases their walks read first and pos_table entries of seeds ahead.  Returns (hits, s, j)."""
    k = 0
    ns = len(lo)
    while k < AHEAD and s < ns:
        c = counts[s]
        take = min(c - j, AHEAD - k)
        q = qpos[s] + size
        at = lo[s] + j
        if j == 0 and s + SEEDS_AHEAD < ns:
            prefetch(pos_table, lo[s + SEEDS_AHEAD])
        for t in range(take):
            r = np.int64(pos_table[at + t]) + size
            rb[row, k + t] = r
            qb[row, k + t] = q
            prefetch(ref, r - 40)  # a random hit's walks read about 36 bases left, 16 right
            prefetch(ref, r + 24)
        k += take
        j += take
        if j == c:
            s += 1
            j = 0
    return k, s, j


@njit
def _bound(rp, qp, ts, tc, xdrop, r, q, step, blocks):
    """The walk from r, q (right: step 2 from the anchor; left: step -2 from anchor - 2) in
    two-base blocks, its x-drop tested at block ends: (stopped, a bound of its best).

    Exact to reject: the drawdown at a block end is the walk's own there, so past x-drop it
    means the walk stopped by then, and the maximum by then bounds its best.  Positions are
    unsigned (a step of -2 wraps), so numba adds no negative-index test to each read."""
    s = 0
    d = 0
    ur, uq, us, three = np.uint64(r), np.uint64(q), np.uint64(step), np.uint64(3)
    for b in range(blocks):
        off = np.uint64(b) * us
        i = (np.uint64(rp[ur + off]) << three) | np.uint64(qp[uq + off])
        t = ts[i]
        s += t
        d = max(d - t, tc[i])
        if d > xdrop:
            return True, s + d
    return False, 0


@njit
def _reject_pass(
    ref,
    qry,
    best,
    rp,
    qp,
    ts,
    tcr,
    tcl,
    ref_len,
    qry_len,
    xdrop,
    pos_table,
    lo,
    qpos,
    counts,
    size,
    seed_best,
    q0,
    keep_from,
    cand_r,
    cand_q,
    late_r,
    late_q,
):
    """Expand every seed's hits; drop those whose walks stop within CAP bases a side under
    `keep_from` (`_bound`), list the rest as candidates for the exact walk (cand_r, cand_q) or,
    when a walk has not stopped within CAP, for the diagonal sweep (late_r, late_q).  Hits are
    gathered AHEAD at a time so their cache misses overlap.  Returns both counts.

    A left walk first crosses its seed, the same `size` bases for every hit of a seed, and
    seed_best[q - q0] bounds any walk's best over them (`seed_bounds`).  So the left bound is
    first taken beyond the seed, from no drawdown (the walk's own there is no smaller, so it
    stops no later): best of the whole walk <= seed_best + the best beyond.  Only where that
    does not reject a hit whose walk stopped is the left walk bounded again, from its anchor.
    A walk that has not stopped by the cap sends its hit to the sweep, unless the sequences
    end before the cap: then the exact walk decides.  A hit within CAP query bases of the last
    such hit on its diagonal is inside the same long HSP as likely as not: it goes to the sweep
    unwalked (the sweep is exact for any hit, and walks that stretch once anyway).
    seed_best is filled here first, from the query's codes `qry` and `best_scores`."""
    _seed_bounds_into(qry, best, q0, size, seed_best)
    rb = np.empty((2, AHEAD), np.int64)
    qb = np.empty((2, AHEAD), np.int64)
    seen_d = np.full(RECENT, -(2**62), np.int64)  # diagonal -> query position of its last late hit
    seen_q = np.zeros(RECENT, np.int64)
    half = CAP // 2
    n_cand = n_late = 0
    k, s, j = _gather(pos_table, lo, qpos, counts, size, 0, 0, rb, qb, 0, ref)
    row = 0
    while k > 0:
        k_next, s, j = _gather(pos_table, lo, qpos, counts, size, s, j, rb, qb, 1 - row, ref)
        for t in range(k):
            r, q = rb[row, t], qb[row, t]
            at = (r - q) & (RECENT - 1)
            if seen_d[at] == r - q and q - seen_q[at] <= CAP:  # inside a long HSP: its stretch
                seen_q[at] = q
                late_r[n_late] = r
                late_q[n_late] = q
                n_late += 1
                continue
            right = min(ref_len - r, qry_len - q) // 2
            left = min(r, q) // 2
            stop, best = _bound(rp, qp, ts, tcr, xdrop, r, q, 2, min(right, half))
            short = right < half  # the sequences end before the cap
            if stop:
                beyond = min((min(r, q) - size) // 2, half)
                stop, best_l = _bound(
                    rp, qp, ts, tcl, xdrop, r - size - 2, q - size - 2, -2, beyond
                )
                short = beyond < half
                if stop:
                    if best + seed_best[q - q0] + best_l < keep_from:
                        continue
                    stop, best_l = _bound(rp, qp, ts, tcl, xdrop, r - 2, q - 2, -2, min(left, half))
                    if stop and best + best_l < keep_from:
                        continue
                    short = left < half
            if stop or short:
                cand_r[n_cand] = r
                cand_q[n_cand] = q
                n_cand += 1
            else:
                late_r[n_late] = r
                late_q[n_late] = q
                n_late += 1
                seen_d[at] = r - q
                seen_q[at] = q
        k = k_next
        row = 1 - row
    return n_cand, n_late


def seed_bounds(qry: np.ndarray, mat: np.ndarray, first: int, last: int, size: int) -> np.ndarray:
    """Per anchor q in [first, last] (q >= size): a bound of any walk's best over the `size`
    bases before q, whatever the reference holds there: the sum over them of the best score
    any reference symbol gets against the query's, where positive (every prefix of the scores
    sums to no more)."""
    cum = np.concatenate(([0], np.cumsum(best_scores(mat)[qry[first - size : last]])))
    return cum[size:] - cum[:-size] if last >= first else cum[:0]


@functools.cache
def _best_of(key: bytes) -> np.ndarray:
    """Per query symbol, the best score any reference symbol gets against it, where positive
    (`seed_bounds`'s terms), of the flat 8x8 matrix in `key`."""
    return np.maximum(np.frombuffer(key, np.int64).reshape(8, 8).max(axis=0), 0)


def best_scores(mat: np.ndarray) -> np.ndarray:
    """`seed_bounds`'s terms of the 8x8 matrix `mat`: per query symbol, its best score, where
    positive."""
    return _best_of(np.asarray(mat, np.int64).tobytes())


def seed_bound_table_fits(mat: np.ndarray, span: int) -> bool:
    """Whether `seed_bound_table`'s uint16 holds every bound over `span` bases of matrix `mat`."""
    return span * int(best_scores(mat).max()) < 1 << 16


def seed_bound_table(xp: ModuleType, codes: Any, best: np.ndarray, span: int) -> Any:
    """Per anchor q in 0..len(codes): `seed_bounds` over the `span` codes before q (0 where
    q < span), as uint16 (the caller checks `seed_bound_table_fits`), on numpy or CuPy (`xp`).
    From running sums in uint32, which may wrap: a window's difference is still exact, being
    far below 2**32."""
    n = len(codes)
    run = xp.zeros(n + 1, xp.uint32)
    xp.cumsum(xp.asarray(best, xp.uint32)[codes], dtype=xp.uint32, out=run[1:])
    out = xp.zeros(n + 1, xp.uint16)
    if n >= span:
        out[span:] = (run[span:] - run[: n + 1 - span]).astype(xp.uint16)
    return out


@njit
def _seed_bounds_into(qry, best, first, size, out):
    """`seed_bounds(qry, mat, first, first + len(out) - 1, size)` into out, with no temporary
    arrays (a sliding sum): a thread's pieces faulted in 6 MB of them each."""
    s = 0
    for k in range(first - size, first):
        s += best[qry[k]]
    for i in range(len(out)):
        out[i] = s
        if i + 1 < len(out):
            s += best[qry[first + i]] - best[qry[first + i - size]]


@njit
def _walk_capped(ref, qry, mat, xdrop, r, q, step, first_pos, lim, cap):
    """A `walk_right` (step 1 from the anchor, best position from -1) or `walk_left` (step -1
    from the base before it, best position from 0) that gives up (ok=False) after `cap` bases;
    `lim` is how many bases the sequences allow.  Returns (best, best position, ok).

    The new-maximum test is an arithmetic select, not a branch: in random sequence it goes
    either way, and a mispredicted branch per base cost about a third of the walk's time."""
    s = 0
    m = 0
    pos = first_pos - 1
    end = min(lim, cap)
    for k in range(end):
        s += mat[ref[r + step * k] * 8 + qry[q + step * k]]
        up = np.int64(s > m)
        m += up * (s - m)
        pos += up * (k + first_pos - pos)
        if m - s > xdrop:
            return m, pos, True
    return m, pos, end == lim


@njit
def _exact_pass(
    ref,
    qry,
    ref_len,
    qry_len,
    mat,
    xdrop,
    cand_r,
    cand_q,
    cap,
    keep_from,
    score,
    rs,
    qs,
    ln,
    late_r,
    late_q,
    n_late,
):
    """Walk each candidate plainly for at most `cap` bases a side: finished hits scoring at least
    `keep_from` go to (score, rs, qs, ln), unfinished ones are added to (late_r, late_q) after
    the n_late there.  Returns both counts."""
    n = 0
    for i in range(len(cand_r)):
        r, q = cand_r[i], cand_q[i]
        mr, pr, ok = _walk_capped(
            ref, qry, mat, xdrop, r, q, 1, 0, min(ref_len - r, qry_len - q), cap
        )
        if ok:
            ml, pl, ok = _walk_capped(ref, qry, mat, xdrop, r - 1, q - 1, -1, 1, min(r, q), cap)
        if not ok:
            late_r[n_late] = r
            late_q[n_late] = q
            n_late += 1
        elif mr + ml >= keep_from:
            score[n] = mr + ml
            rs[n] = r - pl
            qs[n] = q - pl
            ln[n] = pr + pl
            n += 1
    return n, n_late


class Workspace:
    """Buffers of the first pass that one thread reuses from piece to piece (`first_pass`'s
    `work`): each grows to the largest piece it has held and stays, so a thread's pieces do not
    map, fault in and unmap their megabytes every time (the kernel's page faults, which threads
    of one process take in turn, were a sixth of a run's time).  Bounded by the largest piece:
    `engine.cpu.PIECE` hits."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def take(self, name: str, n: int, dtype: type = np.int64) -> np.ndarray:
        """An uninitialised array of n elements, reused under `name`."""
        a = self.arrays.get(name)
        if a is None or len(a) < n or a.dtype != dtype:
            grown = 0 if a is None or a.dtype != dtype else len(a) + len(a) // 2
            self.arrays.pop(name, None)  # grows by half at least: sizes creep up piece by piece
            a = self.arrays[name] = np.empty(max(n, grown), dtype)
        return a[:n]

    def room(self, name: str, n: int) -> np.ndarray:
        """The first n elements of the array under `name`, as they are: it must hold n already."""
        a = self.arrays[name]
        if len(a) < n:
            raise AssertionError(f"workspace array {name!r} holds {len(a)}, not {n}")
        return a[:n]


def first_pass(
    ref: np.ndarray,
    qry: np.ndarray,
    ref_len: int,
    qry_len: int,
    mat: np.ndarray,
    xdrop: int,
    pos_table: np.ndarray,
    lo: np.ndarray,
    qpos: np.ndarray,
    counts: np.ndarray,
    size: int,
    keep_from: int,
    work: Workspace | None = None,
) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, np.ndarray]]:
    """Every hit of these seeds but those inside long HSPs, exactly: ((score, ref_start,
    query_start, len) of the finished hits scoring at least `keep_from`, (R, Q) of the anchors
    left for the diagonal sweep).  Given a `work`space, the arrays returned live in it (valid
    until its next use).

    Most hits die within a few dozen bases well under `keep_from`: a bound on both walks, in
    two-base blocks, drops them (`_reject_pass`).  The few left that finish within `CAP` bases
    a side are walked exactly; the rest, the hits inside long HSPs, are left over."""
    work = work or Workspace()
    total, q_min, q_max = _span(qpos, counts)
    cand_r, cand_q, late_r, late_q = (
        work.take(name, total) for name in ("cand_r", "cand_q", "late_r", "late_q")
    )
    ts, tcr, tcl, best, flat = walk_tables(mat)
    # the piece's own query span: from the query's first base, the bounds of every piece
    # spanned the query up to its seed batch (late seed batches of a 20 Mbp query: 160 MB and
    # 20 M sums a piece)
    seed_best = work.take("seed_best", q_max - q_min + 1)
    n_cand, n_late = _reject_pass(
        ref,
        qry,
        best,
        pair_view(ref),
        pair_view(qry),
        ts,
        tcr,
        tcl,
        ref_len,
        qry_len,
        int(xdrop),
        pos_table,
        lo,
        qpos,
        counts,
        size,
        seed_best,
        q_min + size,
        keep_from,
        cand_r,
        cand_q,
        late_r,
        late_q,
    )
    # room for every late hit after the finished ones: `sweep_late` appends the swept there
    room = n_cand + n_late
    score, rs, qs, ln = (work.take(name, room) for name in ("score", "rs", "qs", "ln"))
    n, n_late = _exact_pass(
        ref,
        qry,
        ref_len,
        qry_len,
        flat,
        int(xdrop),
        cand_r[:n_cand],
        cand_q[:n_cand],
        CAP,
        keep_from,
        score,
        rs,
        qs,
        ln,
        late_r,
        late_q,
        n_late,
    )
    return (score[:n], rs[:n], qs[:n], ln[:n]), (late_r[:n_late], late_q[:n_late])


def sweep_late(
    ref: np.ndarray,
    qry: np.ndarray,
    ref_len: int,
    qry_len: int,
    mat: np.ndarray,
    xdrop: int,
    done: tuple[np.ndarray, ...],
    late: tuple[np.ndarray, np.ndarray],
    keep_from: int,
    work: Workspace,
) -> tuple[np.ndarray, ...]:
    """`first_pass`'s finished hits (`done`) and, after them, those of its late hits (`late`)
    that score at least `keep_from` once swept (`extend_hits`, in one compiled call): (score,
    ref_start, query_start, len), in `work`, where `first_pass` left room for every late hit."""
    n = len(done[0])
    full = [work.room(name, n + len(late[0])) for name in ("score", "rs", "qs", "ln")]
    flat = walk_tables(mat)[4]
    n = _late_sweep(ref, qry, ref_len, qry_len, flat, int(xdrop), *late, keep_from, *full, n)
    return tuple(a[:n] for a in full)


@njit
def _span(qpos, counts):
    """(hits, smallest query position, largest) of a piece's seeds; (0, 0, -1) without seeds."""
    total = np.int64(0)
    for c in counts:
        total += np.int64(c)
    if len(qpos) == 0:
        return total, 0, -1
    lo = hi = np.int64(qpos[0])
    for x in qpos:
        lo = min(lo, np.int64(x))
        hi = max(hi, np.int64(x))
    return total, lo, hi


def walk_tables(mat: np.ndarray) -> tuple[np.ndarray, ...]:
    """`_walk_tables` of the 8x8 matrix `mat` (made once a matrix)."""
    return _walk_tables(np.asarray(mat, np.int64).tobytes())


@functools.cache
def _walk_tables(key: bytes) -> tuple[np.ndarray, ...]:
    """The first pass's tables of the flat 8x8 int64 matrix in `key`: `pair_tables`, then
    `best_scores`, then the matrix as int32."""
    mat = np.frombuffer(key, np.int64)
    return (*pair_tables(mat), best_scores(mat), _flat32(mat))


def extend_seeds(
    ref: np.ndarray,
    qry: np.ndarray,
    ref_len: int,
    qry_len: int,
    mat: np.ndarray,
    xdrop: int,
    pos_table: np.ndarray,
    lo: np.ndarray,
    qpos: np.ndarray,
    counts: np.ndarray,
    size: int,
    keep_from: int,
) -> tuple[np.ndarray, ...]:
    """Extend every hit of these seeds; return (score, ref_start, query_start, len) of the hits
    scoring at least `keep_from` (in no particular order: dedup sorts fully): `first_pass`,
    then the diagonal sweep of the hits inside long HSPs.  Both are exact."""
    work = Workspace()
    done, late = first_pass(
        ref, qry, ref_len, qry_len, mat, xdrop, pos_table, lo, qpos, counts, size, keep_from, work
    )
    return sweep_late(ref, qry, ref_len, qry_len, mat, xdrop, done, late, keep_from, work)


def resolve_chains(
    xp: ModuleType, merged: Any, best: Any, pos: Any, off: Any
) -> tuple[Any, Any]:  # numpy or CuPy arrays (`xp`)
    """Final (best, position of the best) of walks that stopped early by merging (the GPU's
    chain_walks): hits in walking order, walk j either finished (its `best` and `pos` final) or
    merged into walk j + 1 on its diagonal, at the first base at or past j + 1's start where j
    sat at its maximum.  From there both walks add the same scores from equal maxima, so they
    end alike.  A chain j, j + 1, ..., r ends in a finished walk r; walk j began `rise` =
    off[j] + ... + off[r - 1] below r (off[j]: j's score just before j + 1's first base), so
    its best is r's best + rise.  Its best position is that of the first walk k >= j of the
    chain whose maximum at its merge (`best[k]`) already equalled the chain's final best, else
    r's.  `xp` is numpy or cupy; all vectorised."""
    root, _ = _next_flagged(xp, ~merged)  # the last walk has nothing to merge into
    sums = xp.concatenate((xp.zeros(1, xp.int64), xp.cumsum(xp.where(merged, off, 0))))
    rise = sums[root] - sums[:-1]
    final = best[root]
    k, found = _next_flagged(xp, merged & (best - rise >= final))
    return final + rise, xp.where(found & (k < root), pos[k], pos[root])


def _next_flagged(xp, flags):
    """Per j: the first index >= j whose flag is set (any index where there is none), and
    whether there is one."""
    at = xp.flatnonzero(flags)
    before = xp.cumsum(flags) - flags  # flags set before j
    if len(at) == 0:
        return xp.zeros(len(flags), xp.int64), xp.zeros(len(flags), xp.bool_)
    return at[xp.minimum(before, len(at) - 1)], before < len(at)
