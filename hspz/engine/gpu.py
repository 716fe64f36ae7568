"""The GPU backend: the Seed+Filter contract in CuPy with CUDA C kernels (kernels/*.cu).

Per reference bin the seed table is built on the device (one key per indexed position, a device
sort, a histogram).  Per seed batch: the seed stream (device seeder, or the CPU seeder's arrays
uploaded), hit counts and their prefix sum, the semantic `--max-hits` walk, then per semantic
chunk, in physical pieces of at most `PIECE` hits (how many fit never changes bytes):

    fill_seed_ids -> filter_pass (thread per hit: walks bounded, x-drop tested per 8 bases;
                                  rejects about 98% of hits exactly)
                  -> first_pass (the exact walk of the rest, capped at CAP bases a side)
                  -> first_pass again, capped at CAP2, for unfinished hits on short diagonals

Walks read aligned 8-byte words; left walks run over reversed copies of the sequences.  Only
hits scoring at least `--hspthresh` leave the device, plus the unfinished hits on long diagonals
(long HSPs), which the host sweeps a diagonal at a time.  That host half of each semantic chunk
(long sweeps, collapsing identical records, the entropy gate, dedup, final order) runs on host
threads through `hspz.xdrop` and `hspz.hsp`, the same code as the CPU backend, overlapping the
device's next batches: entropy needs the host's correctly rounded `log` to give the same bytes.

This module imports CuPy at import time; `hspz.backends` imports it only when a GPU is chosen.
"""

from __future__ import annotations

import functools
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cupy as cp
import numpy as np

from hspz import hsp, knobs, plan, xdrop
from hspz.engine import (
    BatchOut,
    Context,
    QueryBin,
    RefBin,
    UnitResult,
    assemble,
    record_chunk,
    settle,
    unit_batches,
)
from hspz.seed import SeedShape, SeedTable, batch_hits
from hspz.sequence import SCORE_TABLE, SEED_TABLE

KERNELS = Path(__file__).with_name("kernels")
BLOCK = 256  # threads per block: 8 warps, enough to hide the walks' load latency
CAP = 64  # bases a first-pass walk may take per side before the hit is walked again
CAP2 = 1024  # the same for the second walk of those hits; then the host sweep takes them
PIECE = 1 << 26  # hits processed at once inside one semantic chunk (device memory, not bytes)

_state = {"threads": 1}


def set_threads(threads: int) -> None:
    """Host threads for the CPU seeder (`--threads`; 0 = every core)."""
    _state["threads"] = threads if threads > 0 else (os.cpu_count() or 1)


def device_properties() -> list[dict]:
    """SM count, L2 size, clock and name of every visible device (for the scheduler)."""
    out = []
    for d in range(cp.cuda.runtime.getDeviceCount()):
        p = cp.cuda.runtime.getDeviceProperties(d)
        out.append(dict(sm_count=p["multiProcessorCount"], l2_bytes=p["l2CacheSize"],
                        clock_khz=p.get("clockRate", 0), name=p["name"].decode()))
    return out


def use_device(device: int) -> None:
    cp.cuda.Device(device).use()


# Extra `#define`s for every kernel module (benchmarks compare variants, e.g. WALK_WORDS=0).
DEFINES: dict[str, int] = {}


@functools.lru_cache(maxsize=16)
def _module(name: str, size: int, care: tuple[int, ...], defines: tuple) -> cp.RawModule:
    """One compiled module per kernel file, seed shape and defines (CuPy caches the binary)."""
    preamble = (f"#define SEED_SIZE {size}\n#define WEIGHT {len(care)}\n"
                f"#define CARE_LIST {','.join(map(str, care))}\n")
    preamble += "".join(f"#define {k} {v}\n" for k, v in defines)
    source = preamble + (KERNELS / f"{name}.cu").read_text()
    return cp.RawModule(code=source, options=("--std=c++17",))


def _kernel(shape: SeedShape, module: str, name: str):
    return _module(module, shape.size, shape.care, tuple(sorted(DEFINES.items()))).get_function(
        name)


def _grid(n: int) -> tuple[int]:
    return (max(1, (n + BLOCK - 1) // BLOCK),)


def _ptr(array):
    """A device array, or a null pointer for an optional kernel argument."""
    return np.uint64(0) if array is None else array


def _padded(codes):
    """Score codes with 16 spare bytes: the walks read whole aligned 8-byte words."""
    return cp.concatenate((codes, cp.full(16, 7, cp.uint8)))


def _reversed(codes):
    """Score codes back to front, padded: a left walk is a forward walk of this copy."""
    return _padded(codes[::-1])


def _luts():
    return cp.asarray(SEED_TABLE), cp.asarray(SCORE_TABLE)


# ------------------------------------------------------------------------------------------
# Bins on the device
# ------------------------------------------------------------------------------------------


class DeviceRef:
    """A reference bin on the device: score codes and KegAlign's seed table."""

    def __init__(self, ctx: Context, ref: RefBin):
        seed_lut, score_lut = _luts()
        buf = cp.asarray(ref.packed.buf)
        codes = seed_lut[buf]
        score = score_lut[buf]
        self.score, self.score_rev, self.score_n = _padded(score), _reversed(score), len(score)
        self.len = ref.packed.block_len
        self.index_table, self.pos_table = build_table(ctx.shape, ctx.options.step, codes,
                                                       self.len)


def build_table(shape: SeedShape, step: int, codes, block_len: int):
    """(index_table, pos_table) on the device, equal to `hspz.seed.build_seed_table`."""
    offset = (shape.size + 1) % step
    start = step - offset
    count = max(0, (block_len + offset - shape.size) // step)
    count = max(0, min(count, (len(codes) - shape.size - start) // step + 1))
    keys = cp.empty(count, cp.uint64)
    if count:
        _kernel(shape, "seed", "ref_keys")(
            _grid(count), (BLOCK,), (codes, np.int64(start), np.int64(step), np.int64(count), keys))
    keys.sort()
    n_valid = int(count - cp.count_nonzero(keys == np.uint64(2**64 - 1)))
    keys = keys[:n_valid]
    kmers = (keys >> np.uint64(32)).astype(cp.int64)
    hist = cp.bincount(kmers, minlength=shape.n_kmers) if n_valid else cp.zeros(
        shape.n_kmers, cp.int64)
    index_table = cp.cumsum(hist).astype(cp.uint32)
    pos_table = (keys & np.uint64(0xFFFFFFFF)).astype(cp.uint32)
    return index_table, pos_table


def _device_ref(ctx: Context, ref: RefBin) -> DeviceRef:
    dev = getattr(ref, "_device", None)
    if dev is None:
        dev = DeviceRef(ctx, ref)
        ref._device = dev
    return dev


def _device_query(qry: QueryBin) -> dict:
    dev = getattr(qry, "_device", None)
    if dev is None:
        seed_lut, score_lut = _luts()
        dev = {}
        for strand, packed in qry.packed.items():
            buf = cp.asarray(packed.buf)
            score = score_lut[buf]
            dev[strand] = (seed_lut[buf], _padded(score), _reversed(score))
        qry._device = dev
    return dev


# ------------------------------------------------------------------------------------------
# One seed batch
# ------------------------------------------------------------------------------------------


def _device_seeds(ctx: Context, dref: DeviceRef, codes, first: int, end: int):
    """Dense seed stream on the device: (lo, counts, qpos=None, variants, real seed count)."""
    variants = ctx.shape.weight + 1 if ctx.options.transition else 1
    n = max(end - first, 0)
    lo = cp.empty(n * variants, cp.uint32)
    counts = cp.empty(n * variants, cp.uint32)
    valid = cp.empty(n, cp.uint8)
    if n:
        _kernel(ctx.shape, "seed", "query_seeds")(
            _grid(n), (BLOCK,),
            (codes, np.int64(first), np.int64(n), dref.index_table, np.int32(variants), lo,
             counts, valid))
    seeds = int(cp.count_nonzero(valid)) * variants
    return lo, counts, None, variants, seeds


def _host_seeds(ctx: Context, table: SeedTable, qry: QueryBin, strand: str, chunk):
    """The CPU seeder's compact stream of one batch (runs on a host thread)."""
    return batch_hits(qry.seed[strand], ctx.shape, chunk[0], chunk[1], ctx.options.transition,
                      table)


def _upload_seeds(seeds):
    kmers, qpos, lo, counts = seeds
    return (cp.asarray(lo.astype(np.uint32)), cp.asarray(counts.astype(np.uint32)),
            cp.asarray(qpos), 1, len(kmers))


def _prefetched(fn, items: list, depth: int):
    """fn(item) for each item, in order, computed `depth` ahead on host threads."""
    with ThreadPoolExecutor(max_workers=max(1, depth)) as pool:
        pending = [pool.submit(fn, x) for x in items[:depth]]
        for i in range(len(items)):
            result = pending[i].result()
            pending[i] = None
            if i + depth < len(items):
                pending.append(pool.submit(fn, items[i + depth]))
            yield result


def _use_device_seeder() -> bool:
    """HSPZ_DEVICE_SEEDS decides; unset, the device seeder runs for any worker count.

    behaviour.md makes the CPU seeder the default for one worker.  Here the device seeder is the
    default everywhere: on an H200 it measured 5-9x faster end to end (BENCHMARKS.md), and both
    seeders give the same bytes."""
    choice = knobs.read().device_seeds
    return True if choice is None else choice


class _Batch:
    """Device arrays of one seed batch, shared by its semantic chunks and pieces."""

    def __init__(self, ctx, ref, dref, qry, dqry, strand, chunk, host_seeds=None):
        self.ctx, self.dref, self.strand = ctx, dref, strand
        self.qcodes, self.qscore, self.qscore_rev = dqry[strand]
        self.qlen = qry.packed[strand].block_len
        first = chunk[0]
        end = min(chunk[1], len(qry.seed[strand]) - ctx.shape.size + 1)
        self.first = first
        if host_seeds is not None:
            seeds = _upload_seeds(host_seeds)
        else:
            seeds = _device_seeds(ctx, dref, self.qcodes, first, end)
        self.lo, self.counts, self.qpos, self.variants, self.n_seeds = seeds
        self.cum = cp.cumsum(self.counts, dtype=cp.int64)

    def hit_range(self, s0: int, s1: int) -> tuple[int, int]:
        a = int(self.cum[s0 - 1]) if s0 > 0 else 0
        return a, int(self.cum[s1])

    def survivors(self, h0: int, h1: int, shift: int | None):
        """Extend hits [h0, h1): (list of (score, rs, qs, len) host arrays of the hits scoring
        >= K, host work for the long diagonals or None).

        Walk one caps every hit at CAP bases a side.  Its unfinished hits are sorted by
        diagonal; those on diagonals whose hits span under CAP2 bases (short HSPs) are walked
        again, one thread each, capped at CAP2.  The rest, and any hit still unfinished, go
        to the host's sweep, which walks a diagonal once for all its hits: one GPU thread
        walking a long HSP would hold its whole batch up."""
        done, late = self.first_pass(h0, h1, shift)
        parts = [done]
        R, Q = by_diagonal(late, self.dref.len, self.qlen)
        if len(R):
            short = _short_diagonals(R, Q, CAP2)
            n_short = int(cp.count_nonzero(short))
            if n_short:
                pairs = (R[short].astype(cp.uint64) << np.uint64(32)) | Q[short].astype(cp.uint64)
                again, left = self.walk(pairs, None, 0, n_short, CAP2, 0)
                parts.append(again)
                long_ = ~short
                R, Q = R[long_], Q[long_]
                if len(left):
                    R, Q = by_diagonal(cp.concatenate((
                        (R.astype(cp.uint64) << np.uint64(32)) | Q.astype(cp.uint64), left)),
                        self.dref.len, self.qlen)
        if len(R) == 0:
            return parts, None
        Rh, Qh = R.get(), Q.get()
        return parts, (Rh, Qh, xdrop.diagonal_starts(Rh - Qh))

    def first_pass(self, h0: int, h1: int, shift: int | None):
        """The capped walk of hits [h0, h1) (pass one): (finished survivors as host arrays,
        the unfinished hits as device (r << 32 | q)).  The filter rejects most hits exactly
        first; the exact walk sees only the rest."""
        seed_id = self.seed_ids(h0, h1)
        pairs = None if shift is None else self.ref_order(seed_id, h0, h1 - h0, shift)
        cand = self.filter(pairs, seed_id, h0, h1 - h0, self.ctx.shape.size)
        return self.walk(cand, None, 0, len(cand), CAP, 0)

    def _launch(self, kernel: str, pairs, seed_id, h0: int, n: int, cap: int, size: int, *out):
        o, d = self.ctx.options, self.dref
        mat = cp.asarray(self.ctx.matrix.ravel().astype(np.int32))
        _kernel(self.ctx.shape, "extend", kernel)(
            _grid(n), (BLOCK,),
            (d.score, d.score_rev, np.int64(d.score_n), self.qscore, self.qscore_rev,
             np.int64(len(self.qscore) - 16), np.int64(d.len), np.int64(self.qlen), mat,
             np.int32(o.xdrop), np.int32(o.hspthresh), np.int32(cap), d.pos_table, self.lo,
             self.cum, self.counts, _ptr(seed_id), _ptr(self.qpos), _ptr(pairs), np.int64(h0),
             np.int64(n), np.int64(self.first), np.int32(self.variants), np.int32(size), *out))

    def filter(self, pairs, seed_id, h0: int, n: int, size: int):
        """filter_pass over n hits: the candidates for the exact walk, device (r << 32 | q)."""
        cand = cp.empty(n, cp.uint64)
        count = cp.zeros(1, cp.uint32)
        if n:
            self._launch("filter_pass", pairs, seed_id, h0, n, CAP, size, cand, count)
        return cand[:int(count.get()[0])]

    def walk(self, pairs, seed_id, h0: int, n: int, cap: int, size: int):
        """The exact first_pass kernel over n hits (see `_launch` for which): (finished
        survivors as host arrays, unfinished hits as device (r << 32 | q))."""
        out = [cp.empty(n, cp.int64) for _ in range(4)]
        late = cp.empty(n, cp.uint64)
        counters = cp.zeros(2, cp.uint32)
        if n:
            self._launch("first_pass", pairs, seed_id, h0, n, cap, size, out[1], out[2],
                         out[3], out[0], counters[0:1], late, counters[1:2])
        n_out, n_late = (int(x) for x in counters.get())
        return [a[:n_out].get() for a in out], late[:n_late]

    def seed_ids(self, h0: int, h1: int):
        """seed_id[h - h0]: the seed owning hit h, for hits [h0, h1)."""
        s_first = _search(self.cum, h0)
        s_last = _search(self.cum, h1 - 1)
        seed_id = cp.empty(h1 - h0, cp.int32)
        _kernel(self.ctx.shape, "seed", "fill_seed_ids")(
            _grid(s_last - s_first + 1), (BLOCK,),
            (self.cum, self.counts, np.int64(s_first), np.int64(s_last), np.int64(h0),
             np.int64(h1), seed_id))
        return seed_id

    def ref_order(self, seed_id, h0: int, n: int, shift: int):
        """Hits as (r << 32 | q), counting-sorted by reference window of 2**shift bases."""
        r = cp.empty(n, cp.uint32)
        hist = cp.zeros((self.dref.len >> shift) + 1, cp.uint32)
        _kernel(self.ctx.shape, "extend", "hit_refs")(
            _grid(n), (BLOCK,),
            (self.dref.pos_table, self.lo, self.cum, self.counts, seed_id, np.int64(h0),
             np.int64(n), np.int32(shift), r, hist))
        cursor = cp.cumsum(hist, dtype=cp.uint32) - hist
        pairs = cp.empty(n, cp.uint64)
        _kernel(self.ctx.shape, "extend", "scatter_hits")(
            _grid(n), (BLOCK,),
            (r, seed_id, _ptr(self.qpos), np.int64(self.first), np.int32(self.variants),
             np.int64(n), np.int32(shift), cursor, pairs))
        return pairs


def _search(cum, value: int) -> int:
    """Index of the seed owning hit `value` (first cumulative count above it)."""
    probe = cp.asarray([value], dtype=cp.int64)
    return int(cp.searchsorted(cum, probe, side="right")[0])


def semantic_chunks(cum, max_hits: int, full: bool) -> list[tuple[int, int]]:
    """The `--max-hits` walk.  A batch under H hits is one chunk and its counts stay on the
    device; otherwise (or with HSPZ_CHUNK_WALK=full) the counts are copied and walked on the
    host by `plan.chunk_walk`, the one definition of the walk."""
    n = len(cum)
    if n and not full and int(cum[-1]) < max_hits:
        return [(0, n - 1)]
    return plan.chunk_walk(cum.get(), max_hits)


def by_diagonal(late, ref_len: int, qlen: int):
    """Device hits (r << 32 | q) as (R, Q) int64, sorted by diagonal R - Q, then R."""
    R = (late >> np.uint64(32)).astype(cp.int64)
    Q = (late & np.uint64(0xFFFFFFFF)).astype(cp.int64)
    if len(late) < 2:
        return R, Q
    if ref_len + qlen < 2**32:  # one radix sort of (diagonal + qlen) << 32 | R
        key = (R - Q + qlen).astype(cp.uint64) << np.uint64(32)
        order = cp.argsort(key | (late >> np.uint64(32)))
    else:
        order = cp.lexsort(cp.stack((R, R - Q)))
    return R[order], Q[order]


def _diagonal_edges(R, Q):
    """(first-of-its-diagonal flag per hit, group starts plus the end) of sorted hits."""
    diag = R - Q
    edge = cp.concatenate((cp.ones(1, cp.bool_), diag[1:] != diag[:-1]))
    return edge, cp.concatenate((cp.flatnonzero(edge), cp.asarray([len(R)], cp.int64)))


def _short_diagonals(R, Q, span: int):
    """Per sorted hit: whether its diagonal's hits span fewer than `span` reference bases."""
    edge, starts = _diagonal_edges(R, Q)
    group = cp.cumsum(edge) - 1
    return (R[starts[1:] - 1] - R[starts[:-1]] < span)[group]


def host_finish(ctx: Context, ref: RefBin, qry: QueryBin, strand: str, pieces) -> tuple:
    """Host half of one semantic chunk: sweep the late hits, gate, `settle` (on a thread)."""
    o = ctx.options
    parts = []
    for done, late in pieces:
        parts.extend(done)
        if late is not None:
            res = xdrop.extend_sorted(ref.score, qry.score[strand], ref.packed.block_len,
                                      qry.packed[strand].block_len, ctx.matrix, o.xdrop, *late)
            keep = res[0] >= o.hspthresh
            parts.append([x[keep] for x in res])
    cols = [np.concatenate([p[i] for p in parts] or [np.empty(0, np.int64)]) for i in range(4)]
    cols, counts = hsp.collapse(*cols)
    gated, counts = hsp.gate_counted(ref.score, qry.score[strand], *cols, counts, o.hspthresh,
                                     o.entropy)
    return settle(ctx, gated, counts)


def run_batch(ctx: Context, ref: RefBin, qry: QueryBin, strand: str, chunk, walk_full: bool,
              buckets: int | None, host_seeds, pool: ThreadPoolExecutor):
    """Device half of one seed batch; returns (counts, futures of its semantic chunks' HSPs)."""
    b = _Batch(ctx, ref, _device_ref(ctx, ref), qry, _device_query(qry), strand, chunk,
               host_seeds)
    out = BatchOut(seeds=b.n_seeds, hits=int(b.cum[-1]) if len(b.cum) else 0)
    futures = []
    for s0, s1 in semantic_chunks(b.cum, ctx.options.max_hits, walk_full):
        h_a, h_b = b.hit_range(s0, s1)
        pieces = [b.survivors(h0, min(h0 + PIECE, h_b), buckets) for h0 in range(h_a, h_b, PIECE)]
        futures.append(pool.submit(host_finish, ctx, ref, qry, strand, pieces))
    return out, futures


def run_unit(ctx: Context, ref: RefBin, qry: QueryBin, ordinal: int) -> UnitResult:
    """Every batch of the unit on the current device, the host halves overlapping on threads.

    (Device halves on several streams, one host thread each, measured slower on the H200:
    BENCHMARKS.md.)"""
    k = knobs.read()
    dref = _device_ref(ctx, ref)
    buckets = k.bucket_shift if knobs.buckets_on(k, dref.len) else None
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    t0 = time.perf_counter()
    start.record()
    jobs = unit_batches(ctx, qry)
    if _use_device_seeder():
        seeds = [None] * len(jobs)
    else:  # the CPU seeder runs ahead of the device on host threads; it needs counts only
        table = SeedTable(dref.index_table.get(), np.empty(0, np.uint32))
        seeds = _prefetched(lambda j: _host_seeds(ctx, table, qry, j[1], j[2]), jobs,
                            _state["threads"])
    with ThreadPoolExecutor(max_workers=_state["threads"]) as pool:
        pending = [run_batch(ctx, ref, qry, strand, chunk, k.chunk_walk_full, buckets, s, pool)
                   for (_, strand, chunk), s in zip(jobs, seeds, strict=True)]
        stop.record()
        outs = []
        for (_, strand, _), (out, futures) in zip(jobs, pending, strict=True):
            for f in futures:
                record_chunk(out, f.result(), strand)
            outs.append(out)
    stop.synchronize()
    result = assemble(UnitResult(ordinal, ref.index, qry.index), jobs, outs)
    result.gpu_ms = cp.cuda.get_elapsed_time(start, stop)
    result.device = cp.cuda.Device().id
    result.host_start_ms = t0 * 1e3
    result.host_end_ms = time.perf_counter() * 1e3
    return result
