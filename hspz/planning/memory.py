"""The memory model: an estimate of one worker's peak working set for one unit (`unit_bytes`),
and of the CPU backend's whole run by process (`cpu_estimate`, from the records' seedable bases
where it has them, `hspz.planning.seedable`), which the preflight (`layout.plan_within_budget`) and
`--time` use; `--max-hits 0` as KegAlign derives it from the device size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from hspz.planning.bins import Plan, largest_packed, packed_bp
from hspz.stages.chunks import seed_batches

if TYPE_CHECKING:
    from hspz.planning.seedable import Seedable

MAX_HITS_PER_GIB = 4_194_304  # KegAlign's seed_filter.cu MAX_HITS_PER_GB
CPU_DEVICE_GIB = 16  # the device size `--max-hits 0` assumes on the CPU backend
HEADROOM = 64 << 20  # bytes the memory model adds for what it does not itemise


# --------------------------------------------------------------------------------------------
# --max-hits 0
# --------------------------------------------------------------------------------------------


def kegalign_max_hits(device_bytes: int) -> int:
    """KegAlign's `MAX_HITS = MAX_HITS_PER_GB * (float)(totalGlobalMem / 1073741824.0f)`, with
    its float32 arithmetic and truncation."""
    gib = np.float32(np.float32(device_bytes) / np.float32(1073741824.0))
    return int(np.float32(MAX_HITS_PER_GIB) * gib)


# --------------------------------------------------------------------------------------------
# Working memory model and the preflight
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryModel:
    """What the working-memory estimate of one unit depends on besides the bin sizes."""

    backend: str  # "cpu" (host bytes) or "gpu" (device bytes)
    weight: int  # care positions of the seed
    step: int
    max_hits: int  # hits of one semantic chunk resident at once (at most the engine's piece)
    chunk_size: int
    transition: bool
    threads: int = 1  # per worker
    size: int = 19  # span of the seed (its windows)
    interval_size: int = 10_000_000


# The CPU model's process sizes, measured (peak RSS of the multibin pair, whose tables and
# seed batches are a few MiB): a worker process holds the interpreter, numpy, numba and the compiled
# kernels (157-175 MiB); the parent of worker processes does not load numba, but its reader and
# worker threads and the results it gathers took it to 57.0-58.5 MiB here and 60.5 MiB on CI
# (2026-12-03; 49-51 MiB when first measured, which CI's 60.5 put past 1.25x).
CPU_PROCESS = 160 << 20
PARENT_PROCESS = 58 << 20
READ_COPIES = 2  # transient copies of the inputs while they are read (FASTA, gzip, 2bit alike)
# the share of a seed batch's seeds with hits owed to the query's kinship with the reference, on top
# of the table's chance occupancy: 23% of H. pylori's seeds, 38-39% of S. aureus's (2026-12-01)
HIT_SHARE = 0.2
# a piece's bytes per hit: its candidates or late hits (16 B) and their exact results (32 B);
# most hits are rejected by the block bound, so the sweep's arrays stay small (a thread held
# 41-47 MiB after a full query-list run of H. pylori, S. aureus and mammal30x6, 2026-12-01)
PIECE_BYTES = 48
SEED_BYTES = 16  # a seed with hits in a thread's seed batch (`seed_batch_bytes`)
PARALLEL_TABLE = 1 << 20  # `seed.PARALLEL_MIN`: windows from which a table is built on threads


def unit_bytes(m: MemoryModel, ref_bp: int, query_bp: int, query_bins: int = 1) -> int:
    """Estimated peak bytes one worker needs for a unit of these packed sizes, beyond its
    process (CPU_PROCESS) and the input records, every base counted as seedable.

    GPU (device memory): index table 4·4^k, positions 4·R/step, encoded reference R, both query
    strands 2Q (+Q while a query bin is swapped), seed batch buffers 24 B per seed, 36 B per hit
    of one semantic chunk, scan scratch, plus 64 MiB headroom.  CPU: `cpu_unit_bytes`.
    """
    per_window = (m.weight + 1) if m.transition else 1
    positions = 4 * math.ceil(ref_bp / max(m.step, 1))
    table = 4**m.weight
    if m.backend == "gpu":
        seeds = m.chunk_size * per_window
        swap = query_bp if query_bins > 1 else 0
        scan = (
            12 * math.ceil(m.chunk_size / 256)
            + 8 * math.ceil(seeds / 256)
            + 8 * math.ceil(m.max_hits / 256)
        )
        return (
            4 * table
            + positions
            + ref_bp
            + 2 * query_bp
            + swap
            + 36 * m.max_hits
            + 24 * seeds
            + 4 * m.chunk_size
            + scan
            + HEADROOM
        )
    spans = query_spans(m, query_bp)
    return cpu_unit_bytes(m, ref_bp, ref_bp, query_bp, spans[:, 1] - spans[:, 0], query_bins)


def query_spans(m: MemoryModel, query_bp: int) -> np.ndarray:
    """(a, b) on the plus strand of the bases each seed batch of a query bin of `query_bp`
    packed bytes reads at most (both strands: a minus seed batch's windows mirror plus bases)."""
    out = []
    for _, strand, (a, b) in seed_batches(
        query_bp, m.size, m.interval_size, m.chunk_size, ("plus", "minus")
    ):
        if strand == "plus":
            out.append((a, b + m.size - 1))
        else:  # the minus window at p covers plus bases [L - p - size, L - p)
            out.append((query_bp - b - m.size + 1, query_bp - a))
    return np.clip(np.array(out, np.int64).reshape(-1, 2), 0, max(query_bp, 0))


def held_share(m: MemoryModel, ref_seedable: int) -> float:
    """Share of a seed batch's valid seeds counted as having hits: the table's chance occupancy
    over the reference's seedable positions, and HIT_SHARE of the others for kinship."""
    occupied = 1.0 - math.exp(-math.ceil(ref_seedable / max(m.step, 1)) / 4**m.weight)
    return 1.0 - (1.0 - HIT_SHARE) * (1.0 - occupied)


def seed_batch_bytes(
    m: MemoryModel, valid: np.ndarray, windows: np.ndarray, held: float
) -> np.ndarray:
    """A thread's memory for each of these seed batches (`valid` windows at most, of `windows`):
    16 B per valid seed with hits (position, table index, count and place in the stream, 4 B
    each: `seed.seed_dtype`; the arrays are sized for every seed, but a page never written is
    never resident),
    12 B per valid window (position, k-mer), 8 B per window (seed bound), and PIECE_BYTES per
    hit of one piece being extended (at most `engine.cpu.PIECE` hits however large --max-hits
    is)."""
    per_window = (m.weight + 1) if m.transition else 1
    valid = np.minimum(valid, windows)
    return (
        np.ceil(SEED_BYTES * per_window * held * valid).astype(np.int64)
        + 12 * valid
        + 8 * windows
        + PIECE_BYTES * m.max_hits
    )


def thread_bytes(m: MemoryModel, each: np.ndarray) -> int:
    """The workspaces of the run's threads: a thread keeps its largest seed batch's
    (`xdrop.Workspace` grows, never shrinks), so at most the `threads` largest seed batches, one per
    thread; threads beyond the seed batches never touch one."""
    top = np.sort(each)[::-1][: max(m.threads, 1)]
    return int(top.sum())


def cpu_unit_bytes(
    m: MemoryModel,
    ref_bp: int,
    ref_seedable: int,
    query_bp: int,
    seed_batch_valid: np.ndarray,
    query_bins: int = 1,
) -> int:
    """Peak host bytes of one CPU unit beyond the process and the records: the larger of two
    phases, plus both query strands with their seed and score codes, 6Q (12Q when there are
    several query bins: the next one is prepared while a unit runs).

    Building the reference table: the packed bin, its score and seed codes 3R, the u32 table
    4·4^k (counts, sums and fill cursors in place), positions 4 B per seedable position (only
    valid windows are placed), and on several threads the k-mer of every valid window, at most
    4·R/step (`seed._parallel_table`; its range sorts' copies of a range's positions are
    small).  Running the seed batches: the bin and its score codes 2R, the table,
    its occupancy bits 4^k/8 and positions, and the threads' workspaces (`thread_bytes` of
    `seed_batch_bytes`, `seed_batch_valid` being each seed batch's valid windows at most)."""
    table = 4**m.weight
    step = max(m.step, 1)
    positions = 4 * math.ceil(ref_seedable / step)
    column = 4 * math.ceil(ref_bp / step) if m.threads > 1 and ref_bp >= PARALLEL_TABLE else 0
    build = 3 * ref_bp + 4 * table + positions + column
    spans = query_spans(m, query_bp)
    windows = np.maximum(spans[:, 1] - spans[:, 0] - m.size + 1, 0)
    each = seed_batch_bytes(
        m, np.asarray(seed_batch_valid, np.int64), windows, held_share(m, ref_seedable)
    )
    run = 2 * ref_bp + 4 * table + table // 8 + positions + thread_bytes(m, each)
    return max(build, run) + 6 * query_bp * (2 if query_bins > 1 else 1)


def worst_unit_bytes(
    m: MemoryModel,
    plan: Plan,
    ref_lengths: Sequence[int],
    qry_lengths: Sequence[int],
    seedable: tuple[Seedable, Seedable] | None = None,
) -> int:
    """The estimate for the largest reference bin against the largest query bin; given the
    sides' `seedable.Seedable` (CPU only), an upper bound over every pair of bins, each bin
    counted by the seedable bases of its records (and each seed batch by those it reads)."""
    if not plan.ref_bins or not plan.query_bins:
        return 0
    if seedable is None or m.backend != "cpu":
        r, q = largest_packed(plan, ref_lengths, qry_lengths)
        return unit_bytes(m, r, q, len(plan.query_bins))
    ref_side, qry_side = seedable
    refs = [(packed_bp(b, ref_lengths), ref_side.bases(b)) for b in plan.ref_bins]
    r_bp, r_seedable = max(bp for bp, _ in refs), max(s for _, s in refs)
    worst = 0
    for b in plan.query_bins:
        q_bp = packed_bp(b, qry_lengths)
        spans = query_spans(m, q_bp)
        valid = qry_side.span_bounds(b, qry_lengths, spans)
        worst = max(worst, cpu_unit_bytes(m, r_bp, r_seedable, q_bp, valid, len(plan.query_bins)))
    return worst


@dataclass(frozen=True)
class HostEstimate:
    """The CPU backend's host memory for a run, by process (bytes)."""

    main: int  # the calling process: the records, and the worker itself when W = 1
    worker: int  # one worker process when W >= 2, else 0
    total: int  # all at once (the shared records counted once)
    workers: int


def cpu_estimate(
    m: MemoryModel,
    plan: Plan,
    ref_lengths: Sequence[int],
    qry_lengths: Sequence[int],
    workers: int,
    seedable: tuple[Seedable, Seedable] | None = None,
) -> HostEstimate:
    """Peak host memory of a CPU run of this plan on `workers` workers (`workers_for`).

    One worker runs in the calling process: CPU_PROCESS, every record read (R + Q bytes), and
    the larger of what reading them took besides (READ_COPIES x R + Q: decoded 24 Mbp FASTA and
    2bit, and gzipped FASTA, peaked at three times their bases) and the largest unit's
    `unit_bytes`.  Several: the parent holds the records, what reading took, then their copy
    in shared memory; each worker process CPU_PROCESS, its largest unit and the shared pages of
    that unit's records, which it reads (counted once in the total).

    Given the records' `seedable.sides`, every bin is counted by its seedable bases (uppercase
    ACGT: a soft-masked or N base starts no seed window), each seed batch by those it reads,
    and the threads by the largest seed batches they can hold (`thread_bytes`).

    Invariant: the measured peak RSS (each process's VmHWM) of a run with a written numba
    cache lies between 0.8 and 1.25 times this estimate, so the preflight neither refuses a
    plan that fits nor lets one through that does not (`tests/test_memory.py` checks it on
    the tests' pairs and layouts, one and several workers; one case, many threads on a small
    pair, keeps 0.7).  The measured table on real pairs, and what a first run's numba
    compilation adds, are in BENCHMARKS.md ("Memory: peak RSS against the preflight's
    estimate"; `benchmarks/memory_model.py` regenerates it).
    """
    inputs = sum(ref_lengths) + sum(qry_lengths)
    unit = worst_unit_bytes(m, plan, ref_lengths, qry_lengths, seedable)
    if workers <= 1:
        main = CPU_PROCESS + inputs + max(READ_COPIES * inputs, unit)
        return HostEstimate(main, 0, main, 1)
    r, q = largest_packed(plan, ref_lengths, qry_lengths)
    worker = CPU_PROCESS + unit + r + q
    main = PARENT_PROCESS + (1 + READ_COPIES) * inputs
    running = PARENT_PROCESS + 2 * inputs + workers * (CPU_PROCESS + unit)
    return HostEstimate(main, worker, max(main, running), workers)
