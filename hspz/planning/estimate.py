"""Counting seed hits without extending them: `hspZ hits-estimate` and `--hit-stats`.

`hits-estimate` gives, per work unit, the exact number of seed hits the engine will expand
(the ledger's `hits`), as a dot product of two k-mer histograms instead of a walk over hits:

    hits(r, q) = sum over k-mers u of ref_hist_r[u] * sum over variants t of qry_hist_q[u ^ f_t]

`ref_hist_r` is `np.diff` of reference bin r's seed table `index_table`; `qry_hist_q` counts the
valid query windows of bin q on each strand weighted by how many of the plan's seed batches
contain them (a window on an interval boundary is seeded twice, the last window of a bin never),
and f_t are the transition masks `2 << 2t` (and 0), applied by permuting the histogram's index.
`--stride N` counts only windows whose start is a multiple of N and scales by N (an estimate).

`--hit-stats` needs every seed's own hit count, so it re-derives them on the host per unit from
the prepared bins (`seed.seed_batch_hits`), leaving the engine untouched.
"""

from __future__ import annotations

import numpy as np

from hspz.engine.contract import Context, QueryBin, RefBin
from hspz.io.packing import pack_bin, reverse_complement, seed_codes
from hspz.io.records import Record
from hspz.stages import chunks as planning
from hspz.stages.seed import SeedShape, build_seed_table, seed_batch_hits, window_kmers

PIECE = 1 << 24  # windows histogrammed per pass: bounds the temporary arrays


def reference_histogram(records: list[Record], shape: SeedShape, step: int) -> np.ndarray:
    """How many reference positions hold each k-mer (int64), from the real seed table."""
    packed = pack_bin(records)
    table = build_seed_table(seed_codes(packed.buf), packed.block_len, shape, step)
    return np.diff(table.index_table.astype(np.int64), prepend=0)


def window_multiplicity(n_windows: int, chunks: list[tuple[int, int]]) -> np.ndarray:
    """For every window start, how many of these half-open chunks contain it (int8)."""
    delta = np.zeros(n_windows + 1, np.int8)
    if chunks:
        c = np.clip(np.array(chunks, np.int64), 0, n_windows)
        np.add.at(delta, c[:, 0], 1)
        np.add.at(delta, c[:, 1], -1)
    return np.cumsum(delta[:-1], dtype=np.int8)


def strand_histogram(
    codes: np.ndarray, shape: SeedShape, chunks: list[tuple[int, int]], stride: int = 1
) -> np.ndarray:
    """Valid windows of one strand's seed codes, each weighted by its multiplicity (int64)."""
    n_windows = max(len(codes) - shape.size + 1, 0)
    mult = window_multiplicity(n_windows, chunks)
    hist = np.zeros(shape.n_kmers, np.int64)
    for first in range(0, n_windows, PIECE):
        pos, kmer = window_kmers(codes, shape, first, min(first + PIECE, n_windows))
        weight = mult[pos].astype(np.int64)
        if stride > 1:
            weight *= (pos % stride) == 0
        hist += np.bincount(kmer, weights=weight, minlength=shape.n_kmers).astype(np.int64)
    return hist


def transition_masks(shape: SeedShape, transition: bool) -> list[int]:
    """The XOR masks of a seed's variants: itself, then one transition per care base."""
    return [0] + ([2 << (2 * t) for t in range(shape.weight)] if transition else [])


def query_histogram(ctx: Context, records: list[Record], stride: int = 1) -> np.ndarray:
    """One query bin's histogram over both planned strands, folded over the transition
    variants so that a unit's hits are one dot product with the reference histogram."""
    o, shape = ctx.options, ctx.shape
    plus = pack_bin(records)
    packs = {"plus": plus}
    if "minus" in ctx.strands:
        packs["minus"] = reverse_complement(plus)
    seed_batch_list = planning.seed_batches(
        plus.block_len, shape.size, o.interval_size, o.wga_chunk_size, ctx.strands
    )
    hist = np.zeros(shape.n_kmers, np.int64)
    for strand, packed in packs.items():
        chunks = [c for _, s, c in seed_batch_list if s == strand]
        hist += strand_histogram(seed_codes(packed.buf), shape, chunks, stride)
    return fold_transitions(hist, shape, o.transition)


def fold_transitions(hist: np.ndarray, shape: SeedShape, transition: bool) -> np.ndarray:
    """sum over the variant masks m of hist[u ^ m]: XOR with one bit 2^b swaps the halves of
    every 2^(b+1) block, a strided view rather than a gather."""
    out = hist.copy()
    for m in transition_masks(shape, transition)[1:]:
        out.reshape(-1, 2, m)[:] += hist.reshape(-1, 2, m)[:, ::-1, :]
    return out


def unit_hits(ref_hist: np.ndarray, folded_query: np.ndarray) -> int:
    return int(np.dot(ref_hist, folded_query))


# --------------------------------------------------------------------------------------------
# --hit-stats
# --------------------------------------------------------------------------------------------

LABELS = ("0", "1", "2-4", "5-32", "33-256", ">256")
EDGES = np.array([0, 1, 2, 5, 33, 257])


class HitHistogram:
    """Hits per seed as (distinct value, frequency) pairs; exact, and small to merge."""

    def __init__(self, values: np.ndarray | None = None, freqs: np.ndarray | None = None):
        self.values = np.zeros(0, np.int64) if values is None else np.asarray(values, np.int64)
        self.freqs = np.zeros(0, np.int64) if freqs is None else np.asarray(freqs, np.int64)

    def add_counts(self, counts: np.ndarray) -> None:
        v, f = np.unique(np.asarray(counts, np.int64), return_counts=True)
        self.merge(HitHistogram(v, f))

    def merge(self, other: HitHistogram) -> None:
        values = np.concatenate((self.values, other.values))
        freqs = np.concatenate((self.freqs, other.freqs))
        self.values, inverse = np.unique(values, return_inverse=True)
        self.freqs = np.bincount(inverse, weights=freqs, minlength=len(self.values)).astype(
            np.int64
        )

    def buckets(self) -> np.ndarray:
        which = np.searchsorted(EDGES, self.values, side="right") - 1
        return np.bincount(which, weights=self.freqs, minlength=len(EDGES)).astype(np.int64)

    def quantile(self, q: float) -> int:
        """Nearest-rank quantile (rank floor((n-1)·q)) of the seeds with at least one hit."""
        v, f = self.values[self.values > 0], self.freqs[self.values > 0]
        if not len(v):
            return 0
        rank = int((int(f.sum()) - 1) * q)
        return int(v[np.searchsorted(np.cumsum(f), rank, side="right")])

    def report(self) -> list[str]:
        b = self.buckets()
        seeds = max(int(b.sum()), 1)
        nonempty = self.values > 0
        n = int(self.freqs[nonempty].sum())
        mean = float((self.values * self.freqs).sum()) / n if n else 0.0
        top = int(self.values.max()) if len(self.values) else 0
        lines = [f"hit-stats: {'hits/seed':<10} {'seeds':>12} {'%':>8}"]
        lines += [
            f"hit-stats: {label:<10} {int(c):>12} {c / seeds * 100:>7.2f}%"
            for label, c in zip(LABELS, b, strict=True)
        ]
        lines.append(
            f"hit-stats: non-empty seeds: mean {mean:.2f}  median {self.quantile(0.5)}"
            f"  p95 {self.quantile(0.95)}  p99 {self.quantile(0.99)}  max {top}"
        )
        return lines


def unit_hit_histogram(ctx: Context, ref: RefBin, qry: QueryBin) -> HitHistogram:
    """Every seed of one unit with its hit count, exactly the engine's seed stream."""
    o, hist = ctx.options, HitHistogram()
    seed_batch_list = planning.seed_batches(
        qry.block_len, ctx.shape.size, o.interval_size, o.wga_chunk_size, ctx.strands
    )
    for _, strand, (first, end) in seed_batch_list:
        counts = seed_batch_hits(qry.seed[strand], ctx.shape, first, end, o.transition, ref.table)[
            3
        ]
        hist.add_counts(counts)
    return hist
