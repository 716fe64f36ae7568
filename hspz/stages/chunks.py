"""Seed batches and chunk walks: a query bin's intervals, their minus-strand mirror, KegAlign's wga
chunks, and the semantic --max-hits chunk walk over a seed batch's seeds. Intervals and chunks are
half-open or inclusive exactly as KegAlign has them, so a boundary window may be seeded twice
and the last window of a bin never: that is reproduced on purpose."""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np


def intervals(block_len: int, seed_size: int, interval_size: int) -> list[tuple[int, int]]:
    """Inclusive (s, e) intervals of window starts; interval n (1-based) is file `tmp<n>`."""
    end_pos = block_len - seed_size
    return [(s, min(end_pos, s + interval_size)) for s in range(0, max(end_pos, 0), interval_size)]


def minus_interval(interval: tuple[int, int], block_len: int, seed_size: int) -> tuple[int, int]:
    """The interval on the reverse-complement buffer that mirrors a plus interval."""
    qbl = block_len - seed_size
    s, e = interval
    return qbl - e, qbl - s


def wga_chunks(interval: tuple[int, int], chunk_size: int) -> list[tuple[int, int]]:
    """Half-open chunks [i, min(i + C, e + 1)) for i = s, s + C, ... < e."""
    s, e = interval
    return [(i, min(i + chunk_size, e + 1)) for i in range(s, e, chunk_size)]


def seed_batches(
    block_len: int, seed_size: int, interval_size: int, chunk_size: int, strands: Sequence[str]
) -> list[tuple[int, str, tuple[int, int]]]:
    """Every seed batch of one query bin in plan order: (interval number, strand, chunk)."""
    out = []
    for n, iv in enumerate(intervals(block_len, seed_size, interval_size), 1):
        for strand in strands:
            span = iv if strand == "plus" else minus_interval(iv, block_len, seed_size)
            out += [(n, strand, c) for c in wga_chunks(span, chunk_size)]
    return out


def chunk_walk(cum: np.ndarray, max_hits: int) -> list[tuple[int, int]]:
    """KegAlign's semantic split of one seed batch: inclusive seed ranges, empty ones skipped.

    `cum` is the inclusive prefix sum of hits per seed.  A position before the first seed reads
    as zero hits, which is what keeps a seed with more than H hits whole.
    """
    n = len(cum)
    if n == 0:
        return []
    total = int(cum[-1])
    num_iter = total // max_hits + 1
    ends, limit = [], max_hits
    for _ in range(num_iter - 1):
        pos = int(np.searchsorted(cum, limit, side="left")) - 1
        ends.append(pos)
        limit = (int(cum[pos]) if pos >= 0 else 0) + max_hits
    ends.append(n - 1)
    out, start = [], 0
    for end in ends:
        if start <= end:
            out.append((start, end))
        start = max(start, end + 1)
    return out


def chunk_walks(
    xp: ModuleType,
    cum: Any,
    slots: np.ndarray,
    edges: np.ndarray,
    max_hits: int,
    most_steps: int | None = None,
) -> list[list[tuple[int, int]] | None]:
    """`chunk_walk` of every seed batch of a group at once, as hit ranges of the group; None
    for a seed batch whose walk takes more than `most_steps` searches (left to the caller).

    `cum` (numpy or CuPy, `xp`) is the group's inclusive prefix sum of hits per seed slot; seed
    batch b owns slots [slots[b], slots[b + 1]) and hits [edges[b], edges[b + 1]).  Each of the
    walk's searches runs for every seed batch together over `cum` itself: the group's sum is
    monotone, so a search for edges[b] + L lands where chunk_walk's search for L lands in the seed
    batch's own sum. It never leaves the seed batch: the slot before it sums to edges[b] <
    edges[b] + L, and after k of its total // H searches the limit is at most edges[b] + k·H <=
    edges[b + 1], the sum at its last slot.  Only the ends and their sums are copied back, not the
    counts."""
    s_a, s_b = (np.asarray(x, np.int64) for x in (slots[:-1], slots[1:]))
    h_a, h_b = (np.asarray(x, np.int64) for x in (edges[:-1], edges[1:]))
    searches = np.where(s_b > s_a, (h_b - h_a) // max_hits, 0)  # chunk_walk's num_iter - 1
    walked = searches <= (most_steps if most_steps is not None else searches.max(initial=0))
    steps = int(searches[walked].max(initial=0))
    ends, sums = np.empty((steps, len(s_a)), np.int64), np.empty((steps, len(s_a)), np.int64)
    if steps:
        lo, base = xp.asarray(s_a), xp.asarray(h_a)
        limit, found = base + max_hits, []
        for _ in range(steps):
            pos = xp.searchsorted(cum, limit, side="left") - 1
            value = xp.where(pos >= lo, cum[xp.maximum(pos, 0)], base)  # before: zero hits
            found += [pos, value]
            limit = value + max_hits
        both = xp.stack(found).reshape(steps, 2, len(s_a))
        both = both.get() if hasattr(both, "get") else both
        ends, sums = both[:, 0], both[:, 1]
    out: list[list[tuple[int, int]] | None] = []
    for b in range(len(s_a)):
        if not walked[b]:
            out.append(None)
            continue
        chunks: list[tuple[int, int]] = []
        last, start = s_a[b] - 1, h_a[b]
        if s_b[b] > s_a[b]:
            k = searches[b]
            for end, value in zip([*ends[:k, b], s_b[b] - 1], [*sums[:k, b], h_b[b]], strict=True):
                if end > last:
                    chunks.append((int(start), int(value)))
                    last, start = end, value
        out.append(chunks)
    return out
