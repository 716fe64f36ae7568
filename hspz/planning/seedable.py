"""Seedable bases: the memory preflight's cheap view of how much of each record can seed.

A seed window is valid only where all its bases are uppercase A, C, G or T (`seed_codes`), so a
soft-masked or N-gapped record seeds far fewer windows than its length: its reference table
holds fewer positions and its query seed batches keep fewer seeds.  The preflight
(`plan.cpu_estimate`) counts, per record, the seedable bases in granules of `GRANULE` bases (byte
compares over the record, in blocks; no numba, so a parent of worker processes stays
small).  The count of seedable bases is an upper bound on the valid windows (each starts and ends on
one), and a granule sum over a span an upper bound on the seedable bases in it, so the estimate made
from them never counts fewer windows than there are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

GRANULE = 1 << 14  # bases per count: a seed batch (250 k windows) spans ~16 of them
BLOCK = 1 << 22  # bases looked up at once (a multiple of GRANULE)

_SEEDABLE_BYTES = tuple(b"ACGT")


def granule_counts(seq: np.ndarray) -> np.ndarray:
    """Seedable bases of one record in each granule of GRANULE bases (the last one partial).
    Four byte compares and a count per granule: 0.7 ns a base where a table gather took 1.5
    (36 Mbp on the dev machine; the preflight of issue 24's 30 x 6 Mbp pair)."""
    n = len(seq)
    out = np.zeros(-(-n // GRANULE), np.int64)
    for a in range(0, n, BLOCK):
        block = seq[a : a + BLOCK]
        flags = block == _SEEDABLE_BYTES[0]
        for byte in _SEEDABLE_BYTES[1:]:
            flags |= block == byte
        full = len(flags) // GRANULE * GRANULE
        g = a // GRANULE
        out[g : g + full // GRANULE] = np.count_nonzero(flags[:full].reshape(-1, GRANULE), axis=1)
        if full < len(flags):
            out[g + full // GRANULE] = np.count_nonzero(flags[full:])
    return out


def all_seedable(n: int) -> np.ndarray:
    """`granule_counts` of a record of n bases that are all seedable."""
    out = np.full(-(-n // GRANULE), GRANULE, np.int64)
    if n % GRANULE:
        out[-1] = n % GRANULE
    return out


@dataclass(frozen=True)
class Seedable:
    """Per record of one side, its seedable bases per granule (`granule_counts`)."""

    counts: tuple[np.ndarray, ...]

    @classmethod
    def of(cls, records: Sequence) -> Seedable:
        """The counts of these records (~0.5 s per 100 Mbp on the loaded dev machine); a record
        known only by its length (`sequence.KnownRecord`: a reference read from an index) counts
        every base."""
        return cls(
            tuple(
                granule_counts(r.seq) if hasattr(r, "seq") else all_seedable(len(r))
                for r in records
            )
        )

    def bases(self, members: Sequence[int]) -> int:
        """Seedable bases of a bin's records."""
        return int(sum(int(self.counts[i].sum()) for i in members))

    def span_bounds(
        self, members: Sequence[int], lengths: Sequence[int], spans: np.ndarray
    ) -> np.ndarray:
        """An upper bound on the seedable bases in each half-open span [a, b) of the packed
        bin (records in order, one separator after each): the sum of every granule the span
        touches."""
        if len(spans) == 0:
            return np.zeros(0, np.int64)
        g_start, g_count = [], []
        offset = 0
        for i in members:
            c = self.counts[i]
            g_start.append(offset + GRANULE * np.arange(len(c), dtype=np.int64))
            g_count.append(c)
            offset += lengths[i] + 1
        starts = np.concatenate(g_start)
        cum = np.concatenate(([0], np.cumsum(np.concatenate(g_count))))
        a, b = spans[:, 0], spans[:, 1]
        first = np.maximum(np.searchsorted(starts, a, side="right") - 1, 0)
        last = np.searchsorted(starts, b, side="left")  # granules starting before b
        return np.minimum(cum[last] - cum[first], np.maximum(b - a, 0))


def sides(ref: Sequence, qry: Sequence) -> tuple[Seedable, Seedable]:
    """(reference, query) counts."""
    return Seedable.of(ref), Seedable.of(qry)
