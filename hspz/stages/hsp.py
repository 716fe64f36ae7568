"""HSP filtering and order: the entropy gate, containment dedup and the final sort.

Both backends hand this module the extended hits of one semantic chunk; what it returns is what
the chunk contributes to the segments files (docs/algorithm.md, "Entropy" and "Dedup and order").
"""

from __future__ import annotations

import math

import numpy as np

from hspz.core.jit import njit

# Positions and lengths are below 2^32 (bins are); a score is int64 because a long HSP's sum
# passes 2^31 (two identical 248 Mbp chromosomes score about 2.4e10 with HOXD70), while
# options.SCORE_MAX keeps a maximal one below 2^53.
HSP_DTYPE = np.dtype(
    [("ref_start", "<u4"), ("query_start", "<u4"), ("len", "<u4"), ("score", "<i8")]
)
LN4 = float(np.float32(math.log(4.0)))  # KegAlign divides by a float32 ln 4


@njit
def _entropy(ref, qry, rs, qs, ln):
    """Base-composition entropy of the exact matches of one HSP, 1.0 when under 20 matches."""
    c = np.zeros(4, np.int64)
    for k in range(ln + 1):
        r = ref[rs + k]
        if r < 4 and r == qry[qs + k]:
            c[r] += 1
    if c[0] + c[1] + c[2] + c[3] < 20:
        return 1.0
    total = 0.0
    for i in range(4):
        if c[i] > 0:
            p = c[i] / (ln + 1)
            total += p * math.log(p)
    return -total / LN4


@njit
def _gate(ref, qry, total, rs, qs, ln, thresh, use_entropy, keep, score):
    """Score and entropy gate.  Hits on one walk give the same HSP many times, so the entropy
    of each distinct (ref_start, query_start, len) is counted once (an exact open-address table)."""
    size = 1
    while size < 2 * len(total):
        size *= 2
    slot_of = np.full(size, -1, np.int64)
    ent_of = np.ones(len(total), np.float64)
    for i in range(len(total)):
        t = total[i]
        ent = 1.0
        if use_entropy and thresh <= t <= 3 * thresh:
            h = (rs[i] * 0x2545F4914F6CDD1D + qs[i] * 0x165667B19E3779F9 + ln[i]) & (size - 1)
            while True:
                j = slot_of[h]
                if j < 0:
                    slot_of[h] = i
                    ent = _entropy(ref, qry, rs[i], qs[i], ln[i])
                    break
                if rs[j] == rs[i] and qs[j] == qs[i] and ln[j] == ln[i]:
                    ent = ent_of[j]
                    break
                h = (h + 1) & (size - 1)
            ent_of[i] = ent
        gate = np.float64(np.float32(t)) * ent
        keep[i] = int(gate) >= thresh
        score[i] = int(t * ent)


def gate(
    ref: np.ndarray,
    qry: np.ndarray,
    total: np.ndarray,
    rs: np.ndarray,
    qs: np.ndarray,
    ln: np.ndarray,
    hspthresh: int,
    entropy: bool,
) -> np.ndarray:
    """HSP records (HSP_DTYPE) of the extended hits that pass the score and entropy gate."""
    out = np.empty(len(total), HSP_DTYPE)
    if not len(total):
        return out
    fields = (out["ref_start"], out["query_start"], out["len"], out["score"])
    return out[: _gate_into(ref, qry, total, rs, qs, ln, hspthresh, entropy, *fields)]


@njit
def _gate_into(ref, qry, total, rs, qs, ln, thresh, use_entropy, out_rs, out_qs, out_ln, out_score):
    """`_gate`, its passing hits written in order into the out arrays; returns how many."""
    keep = np.empty(len(total), np.bool_)
    score = np.empty(len(total), np.int64)
    _gate(ref, qry, total, rs, qs, ln, thresh, use_entropy, keep, score)
    m = 0
    for i in range(len(total)):
        if keep[i]:
            out_rs[m], out_qs[m], out_ln[m], out_score[m] = rs[i], qs[i], ln[i], score[i]
            m += 1
    return m


def gate_by_counts(
    total: np.ndarray,
    rs: np.ndarray,
    qs: np.ndarray,
    ln: np.ndarray,
    counts: np.ndarray,
    hspthresh: int,
    entropy: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """`gate`, given each hit's four match counts (counts[i, b]: bases b < 4 of hit i's
    `len + 1` that match, counted where hspthresh <= total <= 3 * hspthresh; the GPU backend
    counts them on the device).  The same arithmetic as `_gate` and `_entropy`, vectorised:
    the terms p log p are added in base order, and `log` is `math.log` (the C library's, as
    numba's is) of each distinct p.  Returns (the records, which hits passed)."""
    ent = np.ones(len(total))
    if entropy and len(total):
        band = np.flatnonzero((total >= hspthresh) & (total <= 3 * hspthresh))
        c, n = counts[band], ln[band] + 1
        acc = np.zeros(len(band))
        for b in range(4):
            present = c[:, b] > 0
            acc = np.where(present, acc + _p_log_p(np.where(present, c[:, b], 1) / n), acc)
        ent[band] = np.where(c.sum(axis=1) < 20, 1.0, -acc / LN4)
    keep = (total.astype(np.float32).astype(np.float64) * ent).astype(np.int64) >= hspthresh
    return _records(keep, (total * ent).astype(np.int64), rs, qs, ln), keep


def _p_log_p(p: np.ndarray) -> np.ndarray:
    """p * log(p), the log taken once per distinct p (numpy's own log may differ in the last
    bit from the C library's)."""
    values, where = np.unique(p, return_inverse=True)
    logs = np.array([math.log(v) for v in values.tolist()], np.float64)
    return p * logs[where]


def _records(
    keep: np.ndarray, score: np.ndarray, rs: np.ndarray, qs: np.ndarray, ln: np.ndarray
) -> np.ndarray:
    out = np.empty(int(keep.sum()), HSP_DTYPE)
    out["ref_start"] = rs[keep]
    out["query_start"] = qs[keep]
    out["len"] = ln[keep]
    out["score"] = score[keep]
    return out


@njit
def _collapse(rs, qs, ln, score, copies, first, out_copies):
    """The distinct records of rs, qs, ln, score: their first indices into `first` and their
    summed copies into `out_copies` (an exact open-address table); returns how many."""
    size = 1
    while size < 2 * len(rs):
        size *= 2
    slot_of = np.full(size, -1, np.int64)
    m = 0
    for i in range(len(rs)):
        h = (
            np.int64(rs[i]) * 0x2545F4914F6CDD1D
            + np.int64(qs[i]) * 0x165667B19E3779F9
            + np.int64(ln[i])
        ) & (size - 1)
        while True:
            j = slot_of[h]
            if j < 0:
                slot_of[h] = m
                first[m] = i
                out_copies[m] = copies[i]
                m += 1
                break
            k = first[j]
            if rs[k] == rs[i] and qs[k] == qs[i] and ln[k] == ln[i] and score[k] == score[i]:
                out_copies[j] += copies[i]
                break
            h = (h + 1) & (size - 1)
    return m


def collapse(h: np.ndarray, copies: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Identical HSP records as one, with their copies counted: (distinct records in order of
    first appearance, copies of each).  Dedup keeps one of identical records either way, and
    `engine.settle_chunks` counts and dumps the copies, so nothing after it can tell; the hits
    of a long HSP all give its record, and a chunk's copies were most of its memory and sort."""
    copies = np.ones(len(h), np.int64) if copies is None else copies
    first = np.empty(len(h), np.int64)
    out = np.empty(len(h), np.int64)
    m = (
        _collapse(h["ref_start"], h["query_start"], h["len"], h["score"], copies, first, out)
        if len(h)
        else 0
    )
    return h[first[:m]], out[:m]


def diagonal_permutation(h: np.ndarray, chunk: np.ndarray | None = None) -> np.ndarray:
    """The order by diagonal (wrapping u32, unsigned), ref_start, len, score descending; by
    `chunk` first where given."""
    diag = h["ref_start"] - h["query_start"]  # u32 arithmetic wraps
    keys = (-h["score"].astype(np.int64), h["len"], h["ref_start"], diag)
    return np.lexsort(keys if chunk is None else (*keys, chunk))


def dedup(h: np.ndarray) -> np.ndarray:
    """Containment dedup of one chunk's HSPs, returned in the final query-major order."""
    return dedup_chunks(h, np.zeros(len(h), np.int64))[0]


def dedup_chunks(h: np.ndarray, chunk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`dedup` of each chunk's HSPs at once (`chunk`: each record's chunk): (the survivors,
    chunk by chunk, each chunk's in the final query-major order; their chunks)."""
    if len(h) == 0:
        return h, chunk
    perm = diagonal_permutation(h, chunk)
    s, c = h[perm], chunk[perm]
    diag = s["ref_start"] - s["query_start"]
    a0 = s["ref_start"].astype(np.int64)
    a1 = a0 + s["len"]
    inside = (a0[1:] >= a0[:-1]) & (a1[1:] <= a1[:-1])
    around = (a0[:-1] >= a0[1:]) & (a1[:-1] <= a1[1:])
    drop = (c[1:] == c[:-1]) & (diag[1:] == diag[:-1]) & (inside | around)
    kept = np.concatenate(([True], ~drop))
    s, c = s[kept], c[kept]
    final = np.lexsort(
        (-s["score"].astype(np.int64), s["len"], s["ref_start"], s["query_start"], c)
    )
    return s[final], c[final]
