"""The CPU backend: the readable reference implementation of the Seed+Filter contract.

Per unit: for each interval, plus chunks then minus chunks; per chunk (one seed batch) the query
seeds, their hit counts, the semantic `--max-hits` walk, and per semantic chunk hit expansion,
x-drop extension (numba, one sweep per diagonal), the score/entropy gate and dedup.
"""

from __future__ import annotations

import time

import numba
import numpy as np

from hspz import hsp, plan
from hspz.engine import Context, QueryBin, RefBin, UnitResult
from hspz.seed import SeedTable, query_seeds
from hspz.xdrop import extend_hits


def set_threads(threads: int) -> None:
    """`--threads`: 0 means every core numba can see."""
    numba.set_num_threads(threads if threads > 0 else numba.config.NUMBA_NUM_THREADS)


def expand_hits(table: SeedTable, kmers: np.ndarray, qpos: np.ndarray, counts: np.ndarray):
    """Reference and query positions of every hit of these seeds, seed-major, pos_table order."""
    total = int(counts.sum())
    seed_of_hit = np.repeat(np.arange(len(kmers)), counts)
    first = np.where(kmers > 0, table.index_table[np.maximum(kmers, 1) - 1], 0).astype(np.int64)
    excl = np.cumsum(counts) - counts
    within = np.arange(total, dtype=np.int64) - excl[seed_of_hit]
    return table.pos_table[first[seed_of_hit] + within].astype(np.int64), qpos[seed_of_hit]


def chunk_hsps(ctx: Context, ref: RefBin, qry: QueryBin, strand: str, r: np.ndarray, q: np.ndarray):
    """Extend one semantic chunk's hits (seed-start positions) and gate them: raw HSP records."""
    size = ctx.shape.size
    o = ctx.options
    total, rs, qs, ln = extend_hits(
        ref.score, qry.score[strand], ref.packed.block_len, qry.packed[strand].block_len,
        ctx.matrix, o.xdrop, r + size, q + size,
    )
    return hsp.gate(ref.score, qry.score[strand], total, rs, qs, ln, o.hspthresh, o.entropy)


def run_batch(ctx: Context, ref: RefBin, qry: QueryBin, strand: str, chunk, result: UnitResult):
    """One seed batch (wga chunk): seeds, hits, semantic chunks; returns its HSP lists in order."""
    o = ctx.options
    kmers, qpos = query_seeds(qry.seed[strand], ctx.shape, chunk[0], chunk[1], o.transition)
    counts = ref.table.counts(kmers)
    cum = np.cumsum(counts)
    result.seeds += len(kmers)
    result.hits += int(cum[-1]) if len(cum) else 0
    out = []
    for s0, s1 in plan.chunk_walk(cum, o.max_hits):
        sl = slice(s0, s1 + 1)
        r, q = expand_hits(ref.table, kmers[sl], qpos[sl], counts[sl])
        raw = chunk_hsps(ctx, ref, qry, strand, r, q)
        result.raw_hsps += len(raw)
        if ctx.keep_raw:
            result.raw.append((strand, hsp.diagonal_order(raw)))
        out.append(hsp.dedup(raw))
    return out


def run_unit(ctx: Context, ref: RefBin, qry: QueryBin, ordinal: int) -> UnitResult:
    """Every interval of the query bin against the reference bin, plus then minus per interval."""
    start = time.perf_counter()
    result = UnitResult(ordinal, ref.index, qry.index)
    o, size = ctx.options, ctx.shape.size
    for n, iv in enumerate(plan.intervals(qry.block_len, size, o.interval_size), 1):
        for strand in ctx.strands:
            span = iv if strand == "plus" else plan.minus_interval(iv, qry.block_len, size)
            parts = []
            for chunk in plan.wga_chunks(span, o.wga_chunk_size):
                parts.extend(run_batch(ctx, ref, qry, strand, chunk, result))
            h = np.concatenate(parts) if parts else np.empty(0, hsp.HSP_DTYPE)
            result.hsps += len(h)
            result.segments.append((n, strand, h))
    result.gpu_ms = (time.perf_counter() - start) * 1e3
    return result


def count_unit(ctx: Context, ref: RefBin, qry: QueryBin) -> tuple[int, int]:
    """(seeds, hits) of one unit without extending anything (`--cpu-only`)."""
    o, size = ctx.options, ctx.shape.size
    seeds = hits = 0
    for iv in plan.intervals(qry.block_len, size, o.interval_size):
        for strand in ctx.strands:
            span = iv if strand == "plus" else plan.minus_interval(iv, qry.block_len, size)
            for chunk in plan.wga_chunks(span, o.wga_chunk_size):
                kmers, _ = query_seeds(qry.seed[strand], ctx.shape, chunk[0], chunk[1], o.transition)
                seeds += len(kmers)
                hits += int(ref.table.counts(kmers).sum())
    return seeds, hits
