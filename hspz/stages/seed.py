"""Seeds: spaced-seed patterns, the reference seed table and the query seed stream.

A window is valid only when every byte under the whole pattern is uppercase ACGT (seed code < 4).
Care bases are packed two bits each, the first care position in the most significant bits.  The
reference table is KegAlign's: `index_table[k]` counts positions whose k-mer is <= k (u32,
cumulative), `pos_table` lists positions grouped by k-mer, ascending inside a group.  The query
stream emits, per valid window j in order, `(kmer, j)` and then, with transitions,
`(kmer ^ (2 << 2t), j)` for t = 0..k-1 (t = 0 is the last care base).
"""

from __future__ import annotations

import functools
import mmap
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from hspz.core.jit import njit, prefetch

if TYPE_CHECKING:
    from hspz.stages.xdrop import Workspace


@dataclass(frozen=True)
class SeedShape:
    """A spaced seed: its span and the offsets of its care positions."""

    size: int
    care: tuple[int, ...]

    @classmethod
    def from_pattern(cls, pattern: str) -> SeedShape:
        return cls(len(pattern), tuple(i for i, c in enumerate(pattern) if c in "1T"))

    @property
    def weight(self) -> int:
        return len(self.care)

    @property
    def n_kmers(self) -> int:
        return 4**self.weight


@dataclass(frozen=True)
class SeedTable:
    """KegAlign's reference seed table for one reference bin."""

    index_table: np.ndarray  # uint32, 4**weight entries, cumulative
    pos_table: np.ndarray  # uint32 positions grouped by k-mer

    @functools.cached_property
    def occupied(self) -> np.ndarray:
        """Bit k of word k >> 6 (uint64) set when k-mer k has positions: 2 MiB for 12of19, where
        the table is 64 MiB, so most seeds (those without hits) are decided in the caches."""
        bits = np.zeros((len(self.index_table) + 63) // 64, np.uint64)
        _occupancy(self.index_table, bits)
        return bits

    def counts(self, kmers: np.ndarray) -> np.ndarray:
        """Number of reference positions holding each k-mer (int64)."""
        hi = self.index_table[kmers].astype(np.int64)
        lo = np.where(kmers > 0, self.index_table[np.maximum(kmers, 1) - 1], 0).astype(np.int64)
        return hi - lo


def window_kmers(
    codes: np.ndarray, shape: SeedShape, first: int, end: int
) -> tuple[np.ndarray, np.ndarray]:
    """(positions int64, kmers uint32) of the valid windows starting in [first, end), ascending.

    `codes` are seed codes (0..3 ACGT, 4 anything else); a window must fit inside `codes`.
    """
    end = min(end, len(codes) - shape.size + 1)
    care = np.asarray(shape.care, dtype=np.int64)
    if end <= first:
        return np.empty(0, np.int64), np.empty(0, np.uint32)
    pos = np.empty(end - first, dtype=np.int64)
    kmer = np.empty(end - first, dtype=np.uint32)
    n = _scan_windows(codes, care, shape.size, first, end, 1, pos, kmer)
    return pos[:n], kmer[:n]


@njit
def _scan_windows(codes, care, size, first, end, step, out_pos, out_kmer):
    """Write the valid windows j = first + i*step < end; return how many."""
    last_bad = -1
    for x in range(first, min(first + size - 1, len(codes))):
        if codes[x] > 3:
            last_bad = x
    n = 0
    edge = first + size - 1
    for j in range(first, end):
        x = j + size - 1
        while edge <= x:
            if codes[edge] > 3:
                last_bad = edge
            edge += 1
        if last_bad >= j or (j - first) % step != 0:
            continue
        k = 0
        for c in care:
            k = (k << 2) | codes[j + c]
        out_pos[n] = j
        out_kmer[n] = k
        n += 1
    return n


PARALLEL_MIN = 1 << 20  # windows below which a table is built on one thread


def build_seed_table(
    codes: np.ndarray, block_len: int, shape: SeedShape, step: int, threads: int = 1
) -> SeedTable:
    """The reference table over positions `start_offset + i*step`, i < (len + offset - size)/step.

    Built in one uint32 array of 4**weight entries (64 MiB for 12of19): counts, their running
    sum, the positions placed from the back (each group's end moves down to its start), the
    starts shifted back to running sums; no int64 copies of it, whose first touch cost more
    than the counting (BENCHMARKS.md).  On `threads` > 1 threads (`_parallel_table`) the same
    bytes, in the valid windows' k-mers (4 B each) more memory."""
    offset = (shape.size + 1) % step
    start_offset = step - offset
    count = max(0, (block_len + offset - shape.size) // step)
    end = min(start_offset + count * step, len(codes) - shape.size + 1)
    care = np.asarray(shape.care, dtype=np.int64)
    windows = max(0, -(-(end - start_offset) // step))
    if threads > 1 and windows >= PARALLEL_MIN and shape.weight < 16:
        return _parallel_table(codes, care, shape, start_offset, end, step, windows, threads)
    table = np.zeros(shape.n_kmers, dtype=np.uint32)
    _table_histogram(codes, care, shape.size, start_offset, end, step, table)
    _running_sum(table)
    pos_table = np.empty(int(table[-1]), dtype=np.uint32)
    _table_fill(codes, care, shape.size, start_offset, end, step, table, pos_table)
    table[:-1] = table[1:]  # each group's start is the previous group's running sum
    table[-1] = len(pos_table)
    return SeedTable(table, pos_table)


def plain_pages(n: int) -> np.ndarray:
    """A uint32 array of n (the kernel's zeros) on its ordinary pages.  numpy asks for
    transparent huge pages for every large array; on a host whose memory is fragmented (one up
    for long) the kernel may compact memory at each first touch of such a page, which made the
    first writes of `_parallel_table`'s transient k-mers cost more than their counting (a 30
    Mbp bin at -t 2 on the dev machine: the table 0.53 s against 0.42 s, BENCHMARKS.md).
    The arrays that the first pass reads at random keep numpy's huge pages."""
    try:
        buf = mmap.mmap(-1, max(4 * n, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except OSError as exc:  # said as numpy says it, naming the size
        raise MemoryError(f"Unable to map {4 * n / 2**20:.1f} MiB for the table's k-mers") from exc
    return np.frombuffer(buf, np.uint32, n)


RANGES_PER_THREAD = 32  # k-mer ranges per thread in `_parallel_table` (a range's table: L2)


def _parallel_table(
    codes: np.ndarray,
    care: np.ndarray,
    shape: SeedShape,
    first: int,
    end: int,
    step: int,
    windows: int,
    threads: int,
) -> SeedTable:
    """`build_seed_table` on several threads, the same bytes, every step split over them: no
    thread reads every window, and nothing runs on one thread but sums over a few thousand
    counts.  The k-mer space is cut into 2**bits ranges (whole occupancy words), the windows
    into one share per thread.  Each thread counts its share's valid windows per range
    (`_share_counts`); from those counts each (range, share) gets its place, range after range,
    shares in position order, and each thread writes its share's k-mers and positions there
    (`_share_scatter`: a range's positions are ascending).  Then each group of ranges, cut to
    equal work, is counting-sorted by one thread (`_range_sort`), in caches: its part of the
    index table, of the positions and of the occupancy bits.  Memory: the k-mers of the valid
    windows beside the positions (a window's k-mer, as the model says), and per thread its
    largest range's positions."""
    from concurrent.futures import ThreadPoolExecutor

    n_kmers, wbits = shape.n_kmers, 2 * shape.weight
    bits = max(0, min(wbits - 6, (threads * RANGES_PER_THREAD - 1).bit_length()))
    shift, ranges = wbits - bits, 1 << bits
    cuts = [first + (i * windows // threads) * step for i in range(threads + 1)]
    cuts[-1] = end
    hist = np.zeros((threads, ranges), np.int64)
    with ThreadPoolExecutor(threads) as pool:
        list(
            pool.map(
                lambda i: _share_counts(
                    codes, care, shape.size, cuts[i], cuts[i + 1], step, shift, hist[i]
                ),
                range(threads),
            )
        )
        sizes = hist.sum(axis=0)
        starts = np.zeros(ranges + 1, np.int64)
        np.cumsum(sizes, out=starts[1:])
        n = int(starts[-1])
        places = starts[:-1][None, :] + np.cumsum(hist, axis=0) - hist
        kmers, pos_table = plain_pages(n), np.empty(n, np.uint32)
        list(
            pool.map(
                lambda i: _share_scatter(
                    codes,
                    care,
                    shape.size,
                    cuts[i],
                    cuts[i + 1],
                    step,
                    shift,
                    places[i],
                    kmers,
                    pos_table,
                ),
                range(threads),
            )
        )
        table = np.empty(n_kmers, np.uint32)
        occupied = np.empty((n_kmers + 63) // 64, np.uint64)
        work = np.cumsum(sizes + (n_kmers >> bits) // 4)
        groups = np.unique(
            np.searchsorted(
                work, work[-1] * np.arange(1, 4 * threads) // (4 * threads), side="right"
            )
        )
        edges = [0, *[int(g) for g in groups if 0 < g < ranges], ranges]
        list(
            pool.map(
                lambda g: _range_sort(
                    kmers,
                    pos_table,
                    starts,
                    edges[g],
                    edges[g + 1],
                    shift,
                    n_kmers,
                    table,
                    occupied,
                ),
                range(len(edges) - 1),
            )
        )
    built = SeedTable(table, pos_table)
    built.__dict__["occupied"] = occupied  # the cached property, made by the same threads
    return built


@njit
def _share_counts(codes, care, size, lo, hi, step, shift, counts):
    """counts[r] += the valid windows at lo + i*step < hi whose k-mer is in range r."""
    pos = np.empty(16384, dtype=np.int64)
    kmer = np.empty(16384, dtype=np.uint32)
    piece = step * 16384  # a multiple of step keeps every piece on the same step grid
    for a in range(lo, hi, piece):
        n = _scan_windows(codes, care, size, a, min(a + piece, hi), step, pos, kmer)
        for t in range(n):
            counts[kmer[t] >> shift] += 1


@njit
def _share_scatter(codes, care, size, lo, hi, step, shift, places, out_kmer, out_pos):
    """Write the k-mer and position of each of `_share_counts`'s windows at its range's next
    place."""
    pos = np.empty(16384, dtype=np.int64)
    kmer = np.empty(16384, dtype=np.uint32)
    piece = step * 16384
    for a in range(lo, hi, piece):
        n = _scan_windows(codes, care, size, a, min(a + piece, hi), step, pos, kmer)
        for t in range(n):
            r = kmer[t] >> shift
            at = places[r]
            out_kmer[at] = kmer[t]
            out_pos[at] = pos[t]
            places[r] = at + 1


@njit
def _range_sort(kmers, pos_table, starts, r0, r1, shift, n_kmers, table, occupied):
    """Ranges r0..r1-1 of the table, range r's windows being kmers/pos_table[starts[r]:
    starts[r + 1]] in position order: per range its counts, their running sum from its start
    (each k-mer's first place), the positions copied out and put back at their k-mer's place
    in order (so ascending in each group; each place ends at its group's end, the index
    table's value), and its occupancy words."""
    most = 0
    for r in range(r0, r1):
        most = max(most, starts[r + 1] - starts[r])
    mine = np.empty(most, np.uint32)
    span = np.int64(1) << shift
    for r in range(r0, r1):
        s0, s1 = starts[r], starts[r + 1]
        k0 = r * span
        k1 = min(k0 + span, n_kmers)
        for k in range(k0, k1):
            table[k] = 0
        for i in range(s0, s1):
            table[kmers[i]] += 1
        run = np.uint32(s0)
        for k in range(k0, k1):
            c = table[k]
            table[k] = run
            run += c
        for i in range(s0, s1):
            mine[i - s0] = pos_table[i]
        for i in range(s0, s1):
            k = kmers[i]
            at = table[k]
            pos_table[at] = mine[i - s0]
            table[k] = at + np.uint32(1)
        for w in range(k0 >> 6, (k1 + 63) >> 6):
            occupied[w] = 0
        before = np.uint32(s0)
        for k in range(k0, k1):
            if table[k] != before:
                occupied[k >> 6] |= np.uint64(1) << np.uint64(k & 63)
            before = table[k]


def start_codegen() -> None:
    """Take one loop from numba's cache: the first such load also starts numba's code generator
    (about 0.1 s), which the table build would otherwise wait for."""
    _running_sum(np.zeros(2, dtype=np.uint32))


@njit
def _running_sum(a):
    for k in range(1, len(a)):
        a[k] += a[k - 1]


@njit
def _table_histogram(codes, care, size, first, end, step, hist):
    pos = np.empty(16384, dtype=np.int64)
    kmer = np.empty(16384, dtype=np.uint32)
    piece = step * 16384  # a multiple of step keeps every piece on the same step grid
    for lo in range(first, end, piece):
        n = _scan_windows(codes, care, size, lo, min(lo + piece, end), step, pos, kmer)
        for i in range(n):
            if i + 16 < n:
                prefetch(hist, kmer[i + 16])
            hist[kmer[i]] += 1


@njit
def _table_fill(codes, care, size, first, end, step, ends, pos_table):
    """Counting sort of positions by k-mer, the last position first: each is put just below its
    group's end, which moves down (so positions stay ascending inside a group, and `ends`
    becomes each group's start)."""
    pos = np.empty(16384, dtype=np.int64)
    kmer = np.empty(16384, dtype=np.uint32)
    piece = step * 16384  # a multiple of step keeps every piece on the same step grid
    pieces = (end - first + piece - 1) // piece if end > first else 0
    for p in range(pieces - 1, -1, -1):
        lo = first + p * piece
        n = _scan_windows(codes, care, size, lo, min(lo + piece, end), step, pos, kmer)
        for i in range(n - 1, -1, -1):
            if i >= 16:
                prefetch(ends, kmer[i - 16])
            k = kmer[i]
            ends[k] -= 1
            pos_table[ends[k]] = pos[i]


def query_seeds(
    codes: np.ndarray, shape: SeedShape, first: int, end: int, transition: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The seed stream of one chunk: (kmers uint32, query positions int64) in stream order."""
    pos, kmer = window_kmers(codes, shape, first, end)
    if not transition:
        return kmer, pos
    flips = (np.uint32(2) << (2 * np.arange(shape.weight, dtype=np.uint32))).astype(np.uint32)
    variants = np.concatenate(([np.uint32(0)], flips)).astype(np.uint32)
    kmers = (kmer[:, None] ^ variants[None, :]).ravel()
    return kmers, np.repeat(pos, len(variants))


@njit
def _seed_batch(codes, care, size, first, end, transition, index_table, kmers, qpos, lo, counts):
    """Seed stream of one chunk with each seed's first pos_table index and hit count."""
    win_pos = np.empty(end - first, np.int64)
    win_kmer = np.empty(end - first, np.uint32)
    n_win = _scan_windows(codes, care, size, first, end, 1, win_pos, win_kmer)
    variants = len(care) if transition else 0
    n = 0
    for w in range(n_win):
        k = win_kmer[w]
        for t in range(-1, variants):
            v = k if t < 0 else k ^ np.uint32(2 << (2 * t))
            start = index_table[v - 1] if v > 0 else np.uint32(0)
            kmers[n] = v
            qpos[n] = win_pos[w]
            lo[n] = start
            counts[n] = index_table[v] - start
            n += 1
    return n


def seed_batch_hits(
    codes: np.ndarray, shape: SeedShape, first: int, end: int, transition: bool, table: SeedTable
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(kmers, qpos, lo, counts) of one chunk's seed stream: the same stream as `query_seeds`,
    with each seed's first index into `pos_table` and its number of hits."""
    end = min(end, len(codes) - shape.size + 1)
    m = max(end - first, 0) * ((shape.weight + 1) if transition else 1)
    kmers = np.empty(m, np.uint32)
    qpos = np.empty(m, np.int64)
    lo = np.empty(m, np.int64)
    counts = np.empty(m, np.int64)
    care = np.asarray(shape.care, dtype=np.int64)
    n = (
        _seed_batch(
            codes,
            care,
            shape.size,
            first,
            max(end, first),
            transition,
            table.index_table,
            kmers,
            qpos,
            lo,
            counts,
        )
        if m
        else 0
    )
    return kmers[:n], qpos[:n], lo[:n], counts[:n]


AHEAD = 8  # windows whose occupancy words are prefetched before they are read
LOOKUPS_AHEAD = 32  # seeds with hits whose table entries are prefetched before they are read


@njit
def _occupancy(index_table, bits):
    before = np.uint32(0)
    for k in range(len(index_table)):
        if index_table[k] != before:
            bits[k >> 6] |= np.uint64(1) << np.uint64(k & 63)
        before = index_table[k]


@njit
def _hit_seeds(
    codes,
    care,
    size,
    first,
    end,
    transition,
    index_table,
    occupied,
    qpos,
    lo,
    counts,
    at,
    win_pos,
    win_kmer,
):
    """`_batch`'s stream, kept only where a seed has hits: per such seed its query position,
    first pos_table index, hit count and place in the whole stream.  Returns (stream length,
    seeds kept, their hits).  The occupancy bits pick the seeds with hits (written without a
    branch: it goes either way), whose k-mers wait in `lo` and windows in `qpos`; then their
    table entries are read, each prefetched LOOKUPS_AHEAD seeds before: the table is far larger
    than the caches.  win_pos and win_kmer hold end - first windows (scratch)."""
    n_win = _scan_windows(codes, care, size, first, end, 1, win_pos, win_kmer)
    variants = len(care) if transition else 0
    n = 0
    for w in range(n_win):
        if w + AHEAD < n_win:
            ahead = win_kmer[w + AHEAD]
            for t in range(-1, variants):
                prefetch(occupied, (ahead if t < 0 else ahead ^ np.uint32(2 << (2 * t))) >> 6)
        k = win_kmer[w]
        for t in range(-1, variants):
            v = np.uint64(k if t < 0 else k ^ np.uint32(2 << (2 * t)))
            lo[n] = v
            at[n] = w * (variants + 1) + t + 1
            # numba types n as int64 throughout; mypy sees only the int of `n = 0`
            n += np.int64((occupied[v >> np.uint64(6)] >> (v & np.uint64(63))) & np.uint64(1))  # type: ignore[assignment]
    hits = 0
    for i in range(n):
        if i + LOOKUPS_AHEAD < n:
            prefetch(index_table, lo[i + LOOKUPS_AHEAD])
        v = lo[i]
        start = index_table[v - 1] if v > 0 else np.uint32(0)
        lo[i] = start
        counts[i] = index_table[v] - start
        hits += int(counts[i])
        qpos[i] = win_pos[at[i] // (variants + 1)]
    return n_win * (variants + 1), n, hits


def seed_dtype(query_len: int, stream: int) -> type:
    """The integer type of a seed batch's per-seed arrays (`hit_seeds`): uint32 wherever query
    positions and stream places fit it (table indices and counts are uint32 already, as
    `index_table` is), else int64.  A thread's seed batch of mammal30x6 holds 1.5 M seeds with
    hits: 24 MiB in uint32 against 49 in int64 (with its prefix sum, 61): at 16 threads the
    run's peak fell from 1679 to 960 MiB (BENCHMARKS.md, issue 24, tenth session)."""
    return np.uint32 if max(query_len, stream) < 1 << 32 else np.int64


def hit_seeds(
    codes: np.ndarray,
    shape: SeedShape,
    first: int,
    end: int,
    transition: bool,
    table: SeedTable,
    work: Workspace | None = None,
) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """The seeds of `seed_batch_hits`'s stream that have hits: (stream length, then per such seed
    its query position, first pos_table index, hit count and place in the stream, then their
    hits in all).  Given a `work`space (`xdrop.Workspace`), the arrays live in it (valid until
    its next use)."""
    end = min(end, len(codes) - shape.size + 1)
    m = max(end - first, 0) * ((shape.weight + 1) if transition else 1)
    windows = max(end - first, 0)
    kind = seed_dtype(len(codes), m)
    take = work.take if work is not None else lambda _, n, dtype=np.int64: np.empty(n, dtype)
    qpos, lo, counts, at = (take(name, m, kind) for name in ("qpos", "lo", "counts", "at"))
    win_pos, win_kmer = take("win_pos", windows), take("win_kmer", windows, np.uint32)
    care = np.asarray(shape.care, dtype=np.int64)
    full, n, hits = (
        _hit_seeds(
            codes,
            care,
            shape.size,
            first,
            max(end, first),
            transition,
            table.index_table,
            table.occupied,
            qpos,
            lo,
            counts,
            at,
            win_pos,
            win_kmer,
        )
        if m
        else (0, 0, 0)
    )
    return full, qpos[:n], lo[:n], counts[:n], at[:n], hits
