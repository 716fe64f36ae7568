"""The plan: bins, work units, intervals, wga chunks and the semantic `--max-hits` chunk walk.

Pure functions of the inputs and the options (behaviour.md §2-3).  A bin is a tuple of record
indices in input order; a work unit is one (reference bin, query bin) pair with the dense ordinal
`r * Q + q`.  Intervals and chunks are half-open or inclusive exactly as KegAlign has them, so a
boundary window may be seeded twice and the last window of a bin never: that is reproduced on
purpose.
"""

from __future__ import annotations

import hashlib
import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MAX_BIN_BP = 4_294_967_295
DEFAULT_BLOCK = 500_000_000


@dataclass(frozen=True)
class WorkUnit:
    ordinal: int
    ref_bin: int
    query_bin: int


@dataclass(frozen=True)
class Plan:
    """The frozen grid: which records form each bin, and the units over them."""

    ref_bins: tuple[tuple[int, ...], ...]
    query_bins: tuple[tuple[int, ...], ...]

    @property
    def units(self) -> list[WorkUnit]:
        nq = len(self.query_bins)
        return [
            WorkUnit(r * nq + q, r, q) for r in range(len(self.ref_bins)) for q in range(nq)
        ]


def balanced_bins(lengths: Sequence[int], target: int) -> tuple[tuple[int, ...], ...]:
    """Longest records first into the currently lightest bin; bins ordered by first record."""
    n = len(lengths)
    if n == 0:
        return ()
    n_bins = min(max(math.ceil(sum(lengths) / target), 1), n)
    order = sorted(range(n), key=lambda i: (-lengths[i], i))
    heap = [(0, b) for b in range(n_bins)]
    members: list[list[int]] = [[] for _ in range(n_bins)]
    for i in order:
        load, b = heapq.heappop(heap)
        members[b].append(i)
        heapq.heappush(heap, (load + lengths[i], b))
    bins = [tuple(sorted(m)) for m in members if m]
    return tuple(sorted(bins, key=lambda b: b[0]))


def kegalign_bins(lengths: Sequence[int], target: int) -> tuple[tuple[int, ...], ...]:
    """Sequential fill in input order; a bin closes once its total is greater than the target."""
    bins, current, total = [], [], 0
    for i, length in enumerate(lengths):
        current.append(i)
        total += length
        if total > target:
            bins.append(tuple(current))
            current, total = [], 0
    if current:
        bins.append(tuple(current))
    return tuple(bins)


def make_bins(lengths: Sequence[int], target: int, kegalign: bool) -> tuple[tuple[int, ...], ...]:
    return kegalign_bins(lengths, target) if kegalign else balanced_bins(lengths, target)


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


def digest_lines(lines: Sequence[bytes]) -> str:
    """First 16 hex digits of sha256 over all segments lines sorted bytewise."""
    h = hashlib.sha256()
    for line in sorted(lines):
        h.update(line)
    return h.hexdigest()[:16]
