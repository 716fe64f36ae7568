"""Seedable bases: the memory preflight's cheap view of how much of each record can seed.

A seed window is valid only where all its bases are uppercase A, C, G or T (`seed_codes`), so a
soft-masked or N-gapped record seeds far fewer windows than its length: its reference table
holds fewer positions and its query seed batches keep fewer seeds.  The preflight
(`plan.cpu_estimate`) counts, per record, the seedable bases in granules of `GRANULE` bases:
byte compares over the record, in blocks (no numba, so a parent of worker processes stays
small), or, for a large record whose reader knows which bases cannot seed (2bit's N and mask
blocks, `Record.unseedable`), from those blocks alone (`blocked_counts`).  The count of seedable
bases is an upper bound on the valid windows (each starts and ends on one), and a granule sum
over a span an upper bound on the seedable bases in it, so the estimate made from them never
counts fewer windows than there are.
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
        flags = _flags(seq[a : a + BLOCK])
        full = len(flags) // GRANULE * GRANULE
        g = a // GRANULE
        out[g : g + full // GRANULE] = np.count_nonzero(flags[:full].reshape(-1, GRANULE), axis=1)
        if full < len(flags):
            out[g + full // GRANULE] = np.count_nonzero(flags[full:])
    return out


def _flags(block: np.ndarray) -> np.ndarray:
    flags = block == _SEEDABLE_BYTES[0]
    for byte in _SEEDABLE_BYTES[1:]:
        flags |= block == byte
    return flags


def grouped_counts(seqs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """`granule_counts` of several records in one pass over their bases laid end to end: a
    fragmented assembly's 100,000 contigs of 1 kbp take 0.24 s so, 0.77 s one by one (0.06 s
    for the same bases as one record; dev machine, medians of 5)."""
    if not seqs:
        return []
    lengths = np.array([len(s) for s in seqs], np.int64)
    grains = -(-lengths // GRANULE)
    ends = np.cumsum(grains)
    firsts = np.cumsum(lengths) - lengths  # each record's offset in the joined bases
    owner = np.repeat(np.arange(len(seqs)), grains)
    k = np.arange(int(ends[-1])) - (ends - grains)[owner]
    starts = firsts[owner] + k * GRANULE
    flags = _flags(np.concatenate(seqs))
    sums = np.add.reduceat(flags, starts, dtype=np.int64) if len(starts) else starts
    return np.split(sums, ends[:-1])


def blocked_counts(n: int, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """`granule_counts` of a record of n bases in which exactly the bases that blocks (start,
    size) cover, in any order and overlapping or not, are unseedable: the granules less the
    blocks' union in each, with no pass over the bases (30 Mbp of 2bit in 1 ms, where the byte
    compares took 30 ms and a reading thread's GIL hand-overs beside them tripled that)."""
    bounds = np.minimum(np.arange(-(-n // GRANULE) + 1, dtype=np.int64) * GRANULE, n)
    keep = sizes > 0
    s, size = starts[keep].astype(np.int64), sizes[keep].astype(np.int64)
    order = np.argsort(s, kind="stable")
    s, e = s[order], s[order] + size[order]
    if len(s) == 0:
        return np.diff(bounds)
    reach = np.maximum.accumulate(e)  # the union: a block past every earlier end starts a run
    first = np.flatnonzero(np.concatenate(([True], s[1:] > reach[:-1])))
    run_s, run_e = s[first], reach[np.concatenate((first[1:] - 1, [len(s) - 1]))]
    cum = np.concatenate(([0], np.cumsum(run_e - run_s)))
    j = np.searchsorted(run_s, bounds, side="right")  # runs starting at or before each bound
    covered = cum[j] - np.where(j > 0, np.maximum(run_e[j - 1] - bounds, 0), 0)
    return np.diff(bounds) - np.diff(covered)


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
        """The counts of these records, runs of small ones together (`grouped_counts`); a
        record known only by its length (`io.digests.KnownRecord`: a reference read from an
        index) counts every base."""
        counts: list[np.ndarray] = []
        group: list[np.ndarray] = []  # small records, counted together (`grouped_counts`)
        held = 0
        for r in records:
            if hasattr(r, "seq") and len(r.seq) < BLOCK:
                group.append(r.seq)
                held += len(r.seq)
                if held < BLOCK:
                    continue
            counts += grouped_counts(group)
            group, held = [], 0
            if not hasattr(r, "seq"):
                counts.append(all_seedable(len(r)))
            elif len(r.seq) >= BLOCK and r.unseedable is not None:
                counts.append(blocked_counts(len(r.seq), *r.unseedable))
            elif len(r.seq) >= BLOCK:
                counts.append(granule_counts(r.seq))
        counts += grouped_counts(group)
        return cls(tuple(counts))

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
