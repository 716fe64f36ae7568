"""The CPU backend: the readable reference implementation of the Seed+Filter contract.

Per unit: for each interval, plus chunks then minus chunks; per chunk (one seed batch) the query
seeds, their hit counts, the semantic `--max-hits` walk, and per semantic chunk hit expansion,
x-drop extension (numba, one sweep per diagonal), the score/entropy gate and dedup.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from hspz import hsp, plan
from hspz.engine import Context, QueryBin, RefBin, UnitResult
from hspz.seed import batch_hits, query_seeds
from hspz.xdrop import extend_seeds

_threads = [1]


def set_threads(threads: int) -> None:
    """`--threads`: 0 means every core."""
    _threads[0] = threads if threads > 0 else (os.cpu_count() or 1)


def chunk_hsps(ctx: Context, ref: RefBin, qry: QueryBin, strand: str, qpos, lo, counts):
    """Extend every hit of one semantic chunk's seeds and gate them: raw HSP records."""
    o = ctx.options
    total, rs, qs, ln = extend_seeds(
        ref.score, qry.score[strand], ref.packed.block_len, qry.packed[strand].block_len,
        ctx.matrix, o.xdrop, ref.table.pos_table, lo, qpos, counts, ctx.shape.size, o.hspthresh,
    )
    return hsp.gate(ref.score, qry.score[strand], total, rs, qs, ln, o.hspthresh, o.entropy)


@dataclass
class BatchOut:
    """What one seed batch contributes: counts, and its HSP lists in semantic-chunk order."""

    seeds: int = 0
    hits: int = 0
    raw_hsps: int = 0
    hsps: list = field(default_factory=list)
    raw: list = field(default_factory=list)


def run_batch(ctx: Context, ref: RefBin, qry: QueryBin, strand: str, chunk) -> BatchOut:
    """One seed batch (wga chunk): seeds, hits, semantic chunks, each extended and deduped."""
    o = ctx.options
    kmers, qpos, lo, counts = batch_hits(
        qry.seed[strand], ctx.shape, chunk[0], chunk[1], o.transition, ref.table
    )
    cum = np.cumsum(counts)
    out = BatchOut(seeds=len(kmers), hits=int(cum[-1]) if len(cum) else 0)
    for s0, s1 in plan.chunk_walk(cum, o.max_hits):
        sl = slice(s0, s1 + 1)
        raw = chunk_hsps(ctx, ref, qry, strand, qpos[sl], lo[sl], counts[sl])
        out.raw_hsps += len(raw)
        if ctx.keep_raw:
            out.raw.append((strand, hsp.diagonal_order(raw)))
        out.hsps.append(hsp.dedup(raw))
    return out


def run_unit(ctx: Context, ref: RefBin, qry: QueryBin, ordinal: int) -> UnitResult:
    """Every interval of the query bin against the reference bin, plus then minus per interval.

    Batches are independent, so they run on `--threads` threads (the numba kernels release the
    GIL); their outputs are put back in plan order, so the thread count never changes bytes.
    """
    start = time.perf_counter()
    result = UnitResult(ordinal, ref.index, qry.index)
    o, size = ctx.options, ctx.shape.size
    jobs = []
    for n, iv in enumerate(plan.intervals(qry.block_len, size, o.interval_size), 1):
        for strand in ctx.strands:
            span = iv if strand == "plus" else plan.minus_interval(iv, qry.block_len, size)
            jobs += [(n, strand, c) for c in plan.wga_chunks(span, o.wga_chunk_size)]
    with ThreadPoolExecutor(max_workers=_threads[0]) as pool:
        outs = list(pool.map(lambda j: run_batch(ctx, ref, qry, j[1], j[2]), jobs))
    segments: dict[tuple[int, str], list] = {}
    for (n, strand, _), out in zip(jobs, outs, strict=True):
        segments.setdefault((n, strand), []).extend(out.hsps)
        result.seeds += out.seeds
        result.hits += out.hits
        result.raw_hsps += out.raw_hsps
        result.raw.extend(out.raw)
    for (n, strand), parts in segments.items():
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
