"""The GPU backend: the Seed+Filter contract in CuPy with CUDA C kernels (kernels/*.cu).

Per reference bin the seed table is built on the device (one key per indexed position, a device
sort, a histogram).  Consecutive seed batches of one (interval, strand) form a group
(`seed_batch_groups`) that shares one device pass: one seed stream (device seeder, or the CPU
seeder's arrays uploaded), one prefix sum of hit counts, each seed batch's semantic `--max-hits`
walk, and every hit tagged with its semantic chunk.  Per group, in physical pieces of at most
`PIECE` hits (how many fit never changes bytes):

    filter_seed16 (thread per hit: finds its seed, walks bounded, x-drop tested per 8 bases, over
                  score codes packed two a byte; rejects about 98% of hits exactly)
      -> first_pass (the exact walk of the rest, capped at CAP bases a side)
      -> first_pass again, capped at CAP2, for the unfinished hits (all of them when few,
         else those on short diagonals)

then per group (`_Group.finish`, kernels in finish.cu), once its last piece is walked:

    chain_walks (the hits still unfinished, on long diagonals, sorted by diagonal: each walks
                 only until it merges into the next hit's walk, `xdrop.resolve_chains`; a
                 diagonal where a walk passes CHAIN_CAP bases goes to sweep_diagonals, one
                 thread sweeping it as `hspz.stages.xdrop` does)
      -> identical (rs, qs, len, chunk) rows collapsed, with their copies (a device sort)
      -> match_counts (the four match counts entropy needs, per distinct row)

Walks read aligned words (the filter's 4-byte words of nibbles, 8 bases each), left walks
backwards from where their right walks began.  Only
the distinct HSPs scoring at least `--hspthresh` leave the device, sorted by their tags into
semantic chunks.  The filters run on a stream of their own at the least priority, each launched
AHEAD pieces before its piece is walked (`run_groups`): the device filters the next piece while
the one launching thread walks, sorts and finishes the last on its stream, whose blocks go first.
The host half of each group (the entropy gate from the counts, then dedup and final order of
every chunk, one vectorised call) runs on a host thread through `hspz.stages.hsp`, overlapping
the device's next groups: entropy's `log` is the host's, the C library's, which the
CPU backend uses too (CUDA's `log` is not guaranteed to round alike, and the gate's decision
rests on it).  The GPU path loads no numba (`hspz.core.jit`) and makes no host sequence codes
(HOST_CODES) unless the CPU seeder runs.

Importing this module imports no CuPy: `cp` stands for it until the first use of any of its
names (`_CupyOnFirstUse`), so `BACKEND` is made, and its capabilities read, on a machine
without CUDA; `hspz.engine.backends` uses it only when a GPU is chosen.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from hspz.core import knobs, lean
from hspz.engine import cuda_source
from hspz.engine.contract import (
    Capabilities,
    Context,
    Index,
    Progress,
    QueryBin,
    RefBin,
    SeedBatchOut,
    SeedBatchTally,
    UnitResult,
    assemble,
    bases_free_bin,
    prepare_query,
    prepare_reference,
    record_chunk,
    seed_batch_groups,
    settle_chunks,
    unit_seed_batches,
)
from hspz.io.packing import COMPLEMENT, SCORE_TABLE, SEED_TABLE
from hspz.io.records import SEPARATOR, Record
from hspz.stages import chunks as plan
from hspz.stages import hsp, xdrop
from hspz.stages.seed import SeedShape, SeedTable, seed_batch_hits


class _CupyOnFirstUse:
    """Stands for the `cupy` module until one of its names is first used: then imports it (and
    cupyx without scipy, `hspz.core.lean`: CuPy imports cupyx on some first calls) and puts the
    module itself in `cp`'s place, so every later use is a plain module attribute."""

    def __getattr__(self, name: str) -> Any:
        import cupy

        lean.import_without("scipy.sparse", "cupyx")
        globals()["cp"] = cupy
        return getattr(cupy, name)


if TYPE_CHECKING:
    import cupy as cp
else:
    cp = _CupyOnFirstUse()

BLOCK = 256  # threads per block: 8 warps, enough to hide the walks' load latency
CAP = 64  # bases a first-pass walk may take per side before the hit is walked again
CAP2 = 1024  # the same for the second walk of those hits; then the finish's chain walks
FEW_LATE = 16  # at most 1/16 of a piece's hits unfinished: walk them all again, unsorted
PIECE = 1 << 28  # most hits processed at once inside one group (device memory, not bytes);
# each piece costs the launching thread a few synchronisations, so fewer pieces leave the device
# idle less (at 1 << 26, about 600 pieces a unit of a 1000 x 500 Mbp pair left the H200 idle)
DEVICE_STEPS = 32  # --max-hits walks of up to this many searches run on the device: each search
# is a few launches for all of a group's seed batches; a longer walk copies its counts instead
PIECE_BYTES = 64  # device bytes per hit of a piece, were every hit a candidate (`_piece_hits`)
AHEAD_BYTES = 24  # and of a piece filtered ahead: candidates and tags, reference-order pairs
GROUP_BASES = 1 << 24  # window starts whose seed batches share one device pass (seed_batch_groups);
# an interval (10 Mbp by default) is then one group: simM 170.1 ms against 190.8 ms at 1 << 22
HOST_THREADS = 4  # host threads for the host halves while groups are being launched: more starve
# the launching thread of the GIL and leave the device idle (simM 0.143 vs 0.173 ns/hit at 4 vs
# 16 threads: BENCHMARKS.md, "GPU ns per seed hit (H200)"); once the last group is launched,
# every thread takes them
# HSPZ_GPU_FILTER (experimental, docs/knobs.md): the filter kernel and the hits a thread takes;
# every one rejects the same hits exactly (extend.cu, "Experimental filter variants")
FILTERS = {
    "pass": ("filter_pass", 1),
    "hits2": ("filter_hits2", 2),
    "hits4": ("filter_hits4", 4),
    "lane": ("filter_lane", 1),
    "lane4": ("filter_lane4", 4),
    "lane8": ("filter_lane8", 1),
    "nib": ("filter_nib", 1),  # reads nibble-packed codes (_nibbles)
    "nib16": ("filter_nib16", 1),  # nib on 16-bit halves, where they fit (`_filter_kernel`)
    "seed": ("filter_seed", 1),  # nib, its left side first bounded beyond the seed
    "seed16": ("filter_seed16", 1),  # the same on 16-bit halves
}
# the filters over nibble-packed codes
NIBBLE_KERNELS = (
    "filter_nib",
    "filter_nib16",
    "filter_seed",
    "filter_seed16",
    "filter_seed_lean",
    "filter_seed16_lean",
)
HALF = 32000  # filter_nib16's 16-bit halves: cap x best score and xdrop stay under it
# a filter on 16-bit halves -> where they do not fit
WIDE = {"filter_nib16": "filter_nib", "filter_seed16": "filter_seed"}
# the filters that read the query's seed bounds (`_seed_bounds`) -> where a bound would not fit
# their 16 bits
SEED_KERNELS = {"filter_seed": "filter_nib", "filter_seed16": "filter_nib16"}
# simM 0.0948 ns/hit against nib16's 0.1085 in one call (H100; its candidates for the exact walk
# fewer too: first_pass 4.3 against 12.1 ms), the same digest (BENCHMARKS.md, issue 27)
DEFAULT_FILTER = "seed16"
LEAN_HITS = True  # a seed filter over hits in seed order as its LEAN kernel (extend.cu): a
# hit's chunk tag looked up only once it is kept, its slot divided by a multiply-high.  3.3% fewer
# instructions (Nsight Compute); simM 0.0680 and 0.0632 ns/hit against 0.0689 and 0.0643 (H200,
# two calls, one process each), L100 0.0541 against 0.0542.  False: the plain kernels (the GPU
# test's reference)
LEAN = {"filter_seed16": "filter_seed16_lean", "filter_seed": "filter_seed_lean"}
PAD = 16  # spare bytes around the score codes: the walks read whole aligned 8-byte words
SWEEP_BLOCK = 32  # one thread per diagonal, each a long serial walk: spread them over the SMs
CHAIN_CAP = 1 << 12  # bases a chain walk may take; a diagonal with a longer one is swept serially
HOST_CODES = False  # bins need no host sequence codes (`engine.prepare_query`)
MINUS_ON_DEVICE = True  # the query's minus strand made on the device from its plus strand's
# bytes, not uploaded (`_device_query`; one 20 MB pageable upload less on simM).  False: uploaded
AHEAD = 1  # pieces whose filter is launched before a piece is walked (`run_groups`): the
# filters run on a stream of their own, back to back, while the launching thread walks, sorts
# and finishes the pieces before them on its stream.  0: one stream, each piece in turn.
# simM 0.0719 and 0.0743 ns/hit against 0.0998 and 0.0990 at 0 (H200, two calls; AHEAD 2:
# 0.0724), L100 0.0588 against 0.0752 (BENCHMARKS.md, issue 27, eighteenth session)
SEEDS_STAGED = True  # query_seeds' slots stored in order through shared memory (seed.cu):
# simM 0.0691 ns/hit against 0.0771 (H100, one process; False keeps the plain kernel, the GPU
# test's reference)
STAGE_THREADS = 256  # query_seeds_staged's block: seed.cu's STAGE_THREADS
HEAD = 8  # the first group takes at most 1/HEAD of a group's window starts: nothing overlaps
# its seed stream, which the first filter waits for (`seed_batch_groups`; simM 0.0691 against
# 0.0704 at 1, BENCHMARKS.md, issue 27, nineteenth session)
FUSED = True  # `_pack`, `_unpack` and `by_diagonal`'s key and gathers as one kernel each (fewer
# small launches, before each of which the device waited about 35 us).  False: CuPy expressions.
# The two together: simM 0.1004 ns/hit against 0.1051 without (BENCHMARKS.md, issue 27)

_state: dict[str, Any] = {"threads": 1}


def set_threads(threads: int) -> None:
    """Host threads for the CPU seeder (`--threads`; 0 = every core)."""
    _state["threads"] = threads if threads > 0 else (os.cpu_count() or 1)


def use_device(device: int) -> None:
    cp.cuda.Device(device).use()


def warm_worker(worker: int) -> None:
    """Start the context of the device a schedule gives worker `worker` (worker % devices,
    `schedule.make_schedule`), before its job arrives; the job's `use_device` has the last
    word."""
    use_device(worker % cp.cuda.runtime.getDeviceCount())
    cp.cuda.Device().mem_info  # noqa: B018 (creates the context)


@functools.lru_cache(maxsize=16)
def _module(name: str, size: int, care: tuple[int, ...]) -> cp.RawModule:
    """One compiled module per kernel file and seed shape (CuPy caches the binary)."""
    return cp.RawModule(code=cuda_source.source(name, size, care), options=cuda_source.OPTIONS)


def _kernel(shape: SeedShape, module: str, name: str):
    return _module(module, shape.size, shape.care).get_function(name)


def _grid(n: int) -> tuple[int]:
    return (max(1, (n + BLOCK - 1) // BLOCK),)


def _ptr(array):
    """A device array, or a null pointer for an optional kernel argument."""
    return np.uint64(0) if array is None else array


def _mark(stream):
    """An event recorded on `stream` now, for ordering only (no timing)."""
    event = cp.cuda.Event(disable_timing=True)
    event.record(stream)
    return event


def _codes(shape: SeedShape, packed: np.ndarray) -> tuple:
    """(seed codes, score codes) of packed bytes, translated on the device.  The score codes
    are a view from the first base with PAD spare bytes before and after: the walks read whole
    aligned 8-byte words, left walks backwards."""
    n = len(packed)
    seed, score = cp.empty(n, cp.uint8), cp.empty(n + 2 * PAD, cp.uint8)
    _kernel(shape, "seed", "codes_of")(
        _grid(max(n, PAD)),
        (BLOCK,),
        (
            cp.asarray(packed),
            np.int64(n),
            cp.asarray(SEED_TABLE),
            cp.asarray(SCORE_TABLE),
            np.int32(PAD),
            seed,
            score,
        ),
    )
    return seed, score[PAD:]


def _nibbles(shape: SeedShape, score, length: int):
    """The score codes of `score` (a view with PAD codes before and after `length` bases) packed
    two a byte, base p at nibble p + PAD, with spare words after: filter_nib's input."""
    n_out = (length + 2 * PAD + 1) // 2 + 8
    out = cp.empty(n_out, cp.uint8)
    _kernel(shape, "extend", "pack_nibbles")(
        _grid(n_out), (BLOCK,), (score, np.int64(length + PAD), np.int64(n_out), out)
    )
    return out


class DeviceRef:
    """A reference bin on the device: score codes and KegAlign's seed table (and the codes
    packed two a byte, made on first use by a filter that reads them)."""

    _nib: cp.ndarray | None = None

    def nibbles(self, shape: SeedShape) -> cp.ndarray:
        if self._nib is None:
            self._nib = _nibbles(shape, self.score, self.len)
        return self._nib

    def __init__(self, ctx: Context, ref: RefBin):
        codes, self.score = _codes(ctx.shape, ref.packed.buf)
        self.len = ref.packed.block_len
        self.index_table, self.pos_table = build_table(ctx.shape, ctx.options.step, codes, self.len)

    @classmethod
    def from_arrays(
        cls, score: cp.ndarray, index_table: cp.ndarray, pos_table: cp.ndarray, block_len: int
    ) -> DeviceRef:
        dev = cls.__new__(cls)
        dev.score, dev.index_table, dev.pos_table, dev.len = (
            score,
            index_table,
            pos_table,
            block_len,
        )
        return dev


def load_reference(ctx: Context, index: Index, b: int, threads: int = 0) -> RefBin:
    """Reference bin b of an index (`hspz.formats.index.Index`) straight into device memory:
    each piece of its score codes and seed table is checksum-verified on the host, then copied
    in on a stream of its own, so a load on a worker's prefetch thread overlaps the kernels of
    the unit before it.  No host copy of the bin is kept."""
    arrays = index.manifest.arrays
    n = arrays[(b, "enc")].length
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        score = cp.full(n + 2 * PAD, 7, cp.uint8)  # E around the codes, as `_codes` pads them
        index_table = cp.empty(arrays[(b, "index_table")].length, cp.uint32)
        pos_table = cp.empty(arrays[(b, "pos_table")].length, cp.uint32)
        for name, dst in (
            ("enc", score[PAD : PAD + n]),
            ("index_table", index_table),
            ("pos_table", pos_table),
        ):
            # a lambda binding dst per loop, which mypy cannot type
            index.read_array(
                b,
                name,
                lambda first, piece, dst=dst: (  # type: ignore[misc]
                    dst[first : first + len(piece)].set(piece, stream=stream)
                ),
                threads,
            )
        stream.synchronize()
    ref = RefBin(b, bases_free_bin(n - 1), ctx.shape, ctx.options.step, source=index)
    # the device copy rides on the host bin (an attribute RefBin does not declare)
    ref._device = DeviceRef.from_arrays(  # type: ignore[attr-defined]
        score[PAD:], index_table, pos_table, n - 1
    )
    return ref


def index_arrays(shape: SeedShape, step: int, buf: np.ndarray) -> tuple[np.ndarray, ...]:
    """(index_table, pos_table, score codes) of one packed bin, built on the device for
    `hspZ index`: the same bytes as `hspz.formats.index.build_bin_host`."""
    codes, score = _codes(shape, buf)
    index_table, pos_table = build_table(shape, step, codes, len(buf) - 1)
    return index_table.get(), pos_table.get(), score[: len(buf)].get()


def build_table(
    shape: SeedShape, step: int, codes: cp.ndarray, block_len: int
) -> tuple[cp.ndarray, cp.ndarray]:
    """(index_table, pos_table) on the device, equal to `hspz.stages.seed.build_seed_table`."""
    offset = (shape.size + 1) % step
    start = step - offset
    count = max(0, (block_len + offset - shape.size) // step)
    count = max(0, min(count, (len(codes) - shape.size - start) // step + 1))
    keys = cp.empty(count, cp.uint64)
    if count:
        _kernel(shape, "seed", "ref_keys")(
            _grid(count), (BLOCK,), (codes, np.int64(start), np.int64(step), np.int64(count), keys)
        )
    keys.sort()
    index_table = cp.empty(shape.n_kmers, cp.uint32)
    _kernel(shape, "seed", "table_index")(
        _grid(shape.n_kmers),
        (BLOCK,),
        (keys, np.int64(count), np.int64(shape.n_kmers), index_table),
    )
    n_valid = int(index_table[-1])
    pos_table = cp.empty(n_valid, cp.uint32)
    if n_valid:
        _kernel(shape, "seed", "table_positions")(
            _grid(n_valid), (BLOCK,), (keys, np.int64(n_valid), pos_table)
        )
    return index_table, pos_table


def _device_ref(ctx: Context, ref: RefBin) -> DeviceRef:
    dev = getattr(ref, "_device", None)
    if dev is None:
        dev = DeviceRef(ctx, ref)
        ref._device = dev  # type: ignore[attr-defined]  # rides on the host bin
    return dev


def _on_bin(qry: QueryBin, name: str, key: str | None, make: Callable[[], Any]) -> Any:
    """make()'s device arrays, made once per query bin and key (a strand, or None) and kept on
    the host bin as qry.<name>: every group of the bin reads them."""
    made = qry.__dict__.setdefault(name, {})
    if key not in made:
        made[key] = make()
    return made[key]


def _device_nibbles(ctx: Context, qry: QueryBin, strand: str):
    """One strand's device score codes packed two a byte."""
    return _on_bin(
        qry,
        "_device_nib",
        strand,
        lambda: _nibbles(
            ctx.shape, _device_query(ctx, qry)[strand][1], qry.packed[strand].block_len
        ),
    )


def _seed_bounds(ctx: Context, qry: QueryBin, strand: str):
    """One strand's bounds of a walk over the seed's bases before each anchor
    (`xdrop.seed_bound_table`, uint16): filter_seed's input."""

    def make():
        codes = _device_query(ctx, qry)[strand][1][: qry.packed[strand].block_len]
        return xdrop.seed_bound_table(cp, codes, xdrop.best_scores(ctx.matrix), ctx.shape.size)

    return _on_bin(qry, "_device_seed", strand, make)


def _device_query(ctx: Context, qry: QueryBin) -> dict:
    """Each strand's device (seed codes, score codes).  With MINUS_ON_DEVICE the plus strand's
    bytes go up once and the minus strand's are made from them on the device (`_minus_bytes`),
    not uploaded as a second copy."""

    def make():
        if MINUS_ON_DEVICE and "minus" in qry.packed:
            plus = cp.asarray(qry.packed["plus"].buf)
            bufs = {"plus": plus, "minus": _minus_bytes(plus, qry.packed["plus"].block_len)}
        else:
            bufs = {strand: packed.buf for strand, packed in qry.packed.items()}
        return {strand: _codes(ctx.shape, buf) for strand, buf in bufs.items()}

    return _on_bin(qry, "_device", None, make)


def _minus_bytes(plus, block_len: int):
    """`hspz.io.packing.reverse_complement`'s bytes from the plus strand's bytes on the device:
    buf[:block_len] reversed through COMPLEMENT, then the separator.  (From the bytes, not the
    codes: U and X have complements whose codes are not their codes' complements.)"""
    out = cp.empty(block_len + 1, cp.uint8)
    cp.take(cp.asarray(COMPLEMENT), plus[:block_len][::-1], out=out[:block_len])
    out[block_len] = SEPARATOR
    return out


# ------------------------------------------------------------------------------------------
# Seed streams
# ------------------------------------------------------------------------------------------


def _device_seeds(ctx: Context, dref: DeviceRef, codes, first: int, end: int):
    """Dense seed stream of window starts [first, end) on the device: (lo, counts, qpos=None,
    variants, valid window flags)."""
    variants = ctx.shape.weight + 1 if ctx.options.transition else 1
    n = max(end - first, 0)
    lo = cp.empty(n * variants, cp.uint32)
    counts = cp.empty(n * variants, cp.uint32)
    valid = cp.empty(n, cp.uint8)
    if n:
        staged = SEEDS_STAGED and variants > 1  # one slot a window is stored in order anyway
        kernel, threads = (
            ("query_seeds_staged", STAGE_THREADS) if staged else ("query_seeds", BLOCK)
        )
        _kernel(ctx.shape, "seed", kernel)(
            (-(-n // threads),),
            (threads,),
            (
                codes,
                np.int64(first),
                np.int64(n),
                dref.index_table,
                np.int32(variants),
                lo,
                counts,
                valid,
            ),
        )
    return lo, counts, None, variants, valid


def _host_seeds(ctx: Context, table: SeedTable, qry: QueryBin, strand: str, chunk):
    """The CPU seeder's compact stream of one seed batch (runs on a host thread)."""
    return seed_batch_hits(
        qry.seed[strand], ctx.shape, chunk[0], chunk[1], ctx.options.transition, table
    )


def _prefetched(fn: Callable, items: Iterable, depth: int) -> Iterator:
    """fn(item) for each item, in order, at most `depth` at once on host threads (the items
    taken from `items` on the calling thread, in order, as threads come free)."""
    items = iter(items)
    with ThreadPoolExecutor(max_workers=max(1, depth)) as pool:
        ahead = deque(pool.submit(fn, x) for x in itertools.islice(items, max(1, depth)))
        while ahead:
            result = ahead.popleft().result()
            ahead.extend(pool.submit(fn, x) for x in itertools.islice(items, 1))
            yield result


def _stacked(host_seeds: list):
    """The CPU seeder's streams of a group's seed batches as one: (lo, counts, qpos, variants=1,
    each seed batch's first slot then the end)."""
    lo, counts, qpos = (np.concatenate([s[i] for s in host_seeds]) for i in (2, 3, 1))
    slots = np.concatenate(([0], np.cumsum([len(s[0]) for s in host_seeds])))
    return (
        cp.asarray(lo.astype(np.uint32)),
        cp.asarray(counts.astype(np.uint32)),
        cp.asarray(qpos),
        1,
        slots,
    )


def _sums_before(cum, idx: np.ndarray):
    """Device sums of the first idx[i] elements of the array whose inclusive prefix sum is cum."""
    if len(cum) == 0:
        return cp.zeros(len(idx), cp.int64)
    last = cp.asarray(idx - 1)
    return cp.where(last >= 0, cum[cp.maximum(last, 0)], 0)


def _use_device_seeder() -> bool:
    """HSPZ_DEVICE_SEEDS decides; unset, the device seeder runs for any worker count.

    KegAlign-style defaults take the CPU seeder for one worker.  Here the device seeder is the
    default everywhere (docs/workers.md, "Seeder policy"): on an H200 it measured 5-9x faster
    end to end, and both seeders give the same bytes."""
    choice = knobs.read().device_seeds
    return True if choice is None else choice


# ------------------------------------------------------------------------------------------
# One group of seed batches
# ------------------------------------------------------------------------------------------


class _Filtered:
    """A piece's filter, launched: n hits in, its outputs (candidates, their tags, their count)
    and, where it ran on a stream of its own, the event after its kernel, with the arrays the
    kernel reads held until the current stream has waited for that event."""

    def __init__(self, n: int, cand, cand_tag, count, done, held: tuple):
        self.n, self.cand, self.cand_tag, self.count = n, cand, cand_tag, count
        self.done, self.held = done, held

    def candidates(self) -> tuple[Any, Any]:
        """The candidates as device (r << 32 | q) and their tags (waits for the filter)."""
        if self.done is not None:
            cp.cuda.get_current_stream().wait_event(self.done)
            self.done = None
        k = int(self.count.get()[0])
        self.held = ()
        return self.cand[:k], self.cand_tag[:k]


class _Group:
    """Device arrays of consecutive seed batches of one (interval, strand) (`seed_batch_groups`):
    one seed stream and hit prefix sum, each seed batch's semantic chunks tiling one hit range.
    Every hit carries the index of its semantic chunk (a tag) through the walks, so one launch
    covers many chunks and the host still gets each chunk's results apart."""

    def __init__(self, ctx, dref, qry, dqry, strand, chunks, host_seeds=None):
        self.ctx, self.dref, self.strand = ctx, dref, strand
        self.qry = qry
        self.qcodes, self.qscore = dqry[strand]
        self.qlen = qry.packed[strand].block_len
        self.mat = cp.asarray(ctx.matrix.ravel().astype(np.int32))
        first = chunks[0][0]
        end = max(first, min(chunks[-1][1], len(qry.packed[strand].buf) - ctx.shape.size + 1))
        self.first = first
        if host_seeds is not None:
            self.lo, self.counts, self.qpos, self.variants, self.slots = _stacked(host_seeds)
            seen = None
        else:
            self.lo, self.counts, self.qpos, self.variants, valid = _device_seeds(
                ctx, dref, self.qcodes, first, end
            )
            starts = np.array([min(max(c[0], first), end) - first for c in chunks] + [end - first])
            self.slots = starts * self.variants
            seen = _sums_before(cp.cumsum(valid, dtype=cp.int64), starts)
        self.cum = cp.cumsum(self.counts, dtype=cp.int64)
        edges = _sums_before(self.cum, self.slots)
        both = (edges if seen is None else cp.concatenate((edges, seen))).get()
        self.hit_edges = both[: len(chunks) + 1]
        windows = np.diff(self.slots) if seen is None else np.diff(both[len(chunks) + 1 :])
        self.n_seeds = (windows * self.variants).tolist()
        self.total = int(self.hit_edges[-1])

    def semantic_chunks(self, max_hits: int, full: bool) -> list[list[tuple[int, int]]]:
        """Every seed batch's `--max-hits` walk as hit ranges of the group.  The walks of up to
        DEVICE_STEPS searches run on the device, all seed batches at once (`plan.chunk_walks`: only
        the chunks' ends come back); a longer walk (a small --max-hits), or every walk with
        HSPZ_CHUNK_WALK=full, copies the seed batch's counts and walks them on the host
        (`plan.chunk_walk`, the one definition of the walk)."""
        walks = (
            [None] * (len(self.slots) - 1)
            if full
            else plan.chunk_walks(cp, self.cum, self.slots, self.hit_edges, max_hits, DEVICE_STEPS)
        )
        return [self._host_walk(b, max_hits) if w is None else w for b, w in enumerate(walks)]

    def _host_walk(self, b: int, max_hits: int) -> list[tuple[int, int]]:
        s_a, s_b, h_a = int(self.slots[b]), int(self.slots[b + 1]), int(self.hit_edges[b])
        cum = self.cum[s_a:s_b].get() - h_a
        return [
            (h_a + (int(cum[s0 - 1]) if s0 else 0), h_a + int(cum[s1]))
            for s0, s1 in plan.chunk_walk(cum, max_hits)
        ]

    def use_chunks(self, starts: list[int]) -> None:
        """The first hit of every semantic chunk of the group, in order (the tags' table)."""
        self.chunk_start = cp.asarray(np.array(starts or [0], np.int64))

    def launch_filter(self, h0: int, h1: int, shift: int | None, stream=None) -> _Filtered:
        """Pass one's first half over hits [h0, h1), the filter: its inputs made on the current
        stream, its kernel launched on `stream` (None: the current one), nothing waited for."""
        pairs, tags = (None, None) if shift is None else self.ref_order(h0, h1 - h0, shift)
        return self.filter(pairs, tags, h0, h1 - h0, self.ctx.shape.size, stream)

    def survivors(self, filtered: _Filtered):
        """Extend the hits of a piece whose filter was launched (`launch_filter`): (finished
        survivors scoring >= K as device columns (score, rs, qs, len, tag), the hits left for
        `finish` as device (R, Q, tag), any order).

        Walk one caps every hit at CAP bases a side.  When at most 1/FEW_LATE of the hits are
        left unfinished, they are all walked again, capped at CAP2.  Otherwise they are sorted
        by diagonal and only those on diagonals whose hits span under CAP2 bases (short HSPs)
        are walked again: many unfinished hits mean long HSPs, each hit of which would walk
        CAP2 bases in vain.  Hits still unfinished go to `finish`'s chain walks, where each hit
        walks only to the next hit's start: one GPU thread walking a whole long HSP would hold
        its group up."""
        done, late, tag = self.walk(*filtered.candidates(), CAP, 0)
        parts = [done]
        if len(late) and FEW_LATE * len(late) <= filtered.n:
            again, late, tag = self.walk(late, tag, CAP2, 0)
            return parts + [again], (*_unpack(late), tag)
        R, Q, T = by_diagonal(late, tag, self.dref.len, self.qlen)
        if len(R):
            short = _short_diagonals(R, Q, CAP2)
            n_short = int(cp.count_nonzero(short))
            if n_short:
                again, left, left_tag = self.walk(_pack(R[short], Q[short]), T[short], CAP2, 0)
                parts.append(again)
                long_ = ~short
                R, Q, T = (
                    cp.concatenate((x[long_], y))
                    for x, y in zip((R, Q, T), (*_unpack(left), left_tag), strict=True)
                )
        return parts, (R, Q, T)

    def _launch(
        self,
        kernel: str,
        pairs,
        tags,
        h0: int,
        n: int,
        cap: int,
        size: int,
        *out,
        per_thread: int = 1,
        stream=None,
    ) -> tuple:
        """Launch `kernel` over n hits on the current stream, or on `stream` after the current
        stream's work so far; returns the arguments (with `stream`, the arrays it reads until
        it is waited for)."""
        o, d = self.ctx.options, self.dref
        function = _kernel(self.ctx.shape, "extend", kernel)
        ref_codes, qry_codes = d.score, self.qscore
        if kernel in NIBBLE_KERNELS:
            ref_codes = d.nibbles(self.ctx.shape)
            qry_codes = _device_nibbles(self.ctx, self.qry, self.strand)
        args = (
            ref_codes,
            qry_codes,
            np.int64(d.len),
            np.int64(self.qlen),
            self.mat,
            np.int32(o.xdrop),
            np.int32(o.hspthresh),
            np.int32(cap),
            d.pos_table,
            self.lo,
            self.cum,
            self.counts,
            self._block_seeds(h0, n) if pairs is None else _ptr(None),
            _ptr(self.qpos),
            _ptr(pairs),
            _ptr(tags),
            self.chunk_start,
            np.int32(len(self.chunk_start)),
            np.int64(h0),
            np.int64(n),
            np.int64(self.first),
            np.int32(self.variants),
            np.int32(size),
            *out,
        )
        grid = (-(-_grid(n)[0] // per_thread),)
        if stream is not None:
            stream.wait_event(_mark(cp.cuda.get_current_stream()))
        with contextlib.nullcontext() if stream is None else stream:
            function(grid, (BLOCK,), args)
        return args

    def _block_seeds(self, h0: int, n: int):
        """bseed[b]: the seed owning block b's first hit, then the last hit's seed (see
        `owner` in extend.cu)."""
        blocks = _grid(n)[0]
        marks = h0 + cp.minimum(cp.arange(blocks + 1, dtype=cp.int64) * BLOCK, max(n - 1, 0))
        return cp.searchsorted(self.cum, marks, side="right")

    def filter(self, pairs, tags, h0: int, n: int, size: int, stream=None) -> _Filtered:
        """The filter (DEFAULT_FILTER, or HSPZ_GPU_FILTER's) over n hits, launched on `stream`
        (None: the current one): the candidates for the exact walk, device (r << 32 | q), and
        their tags, once `_Filtered.candidates` asks.  Nothing is allocated on `stream`: its
        inputs and outputs are made on the current stream and held until that stream has
        waited for the filter."""
        cand = cp.empty(n, cp.uint64)
        cand_tag = cp.empty(n, cp.uint32)
        count = cp.zeros(1, cp.uint32)
        held: tuple = ()
        if n:
            kernel, per_thread = _filter_kernel(self.ctx)
            seed: tuple = ()
            if kernel in SEED_KERNELS:
                span = np.int32(self.ctx.shape.size)
                seed = (_seed_bounds(self.ctx, self.qry, self.strand), span)
            if LEAN_HITS and pairs is None:
                kernel = LEAN.get(kernel, kernel)
            held = self._launch(
                kernel,
                pairs,
                tags,
                h0,
                n,
                CAP,
                size,
                *seed,
                cand,
                cand_tag,
                count,
                per_thread=per_thread,
                stream=stream,
            )
        return _Filtered(n, cand, cand_tag, count, None if stream is None else _mark(stream), held)

    def walk(self, pairs, tags, cap: int, size: int):
        """The exact first_pass kernel over hits `pairs` (tags `tags`): (finished survivors as
        device (score, rs, qs, len, tag), unfinished hits as device (r << 32 | q), their
        tags)."""
        n = len(pairs)
        out = [cp.empty(n, cp.int64) for _ in range(4)] + [cp.empty(n, cp.uint32)]
        late, late_tag = cp.empty(n, cp.uint64), cp.empty(n, cp.uint32)
        counters = cp.zeros(2, cp.uint32)
        if n:
            self._launch(
                "first_pass",
                pairs,
                tags,
                0,
                n,
                cap,
                size,
                out[1],
                out[2],
                out[3],
                out[0],
                out[4],
                counters[0:1],
                late,
                late_tag,
                counters[1:2],
            )
        n_out, n_late = (int(x) for x in counters.get())
        return [a[:n_out] for a in out], late[:n_late], late_tag[:n_late]

    def finish(self, pieces) -> tuple:
        """The group's distinct HSPs, on the host, ordered by semantic chunk: (score, rs, qs,
        len, copies of each, match counts (n x 4), chunk)."""
        cols = [cp.concatenate([p[i] for parts, _ in pieces for p in parts]) for i in range(5)]
        R, Q, T = (cp.concatenate([x[i] for _, x in pieces]) for i in range(3))
        if len(R):
            swept = self.sweep(*by_diagonal(_pack(R, Q), T, self.dref.len, self.qlen))
            cols = [cp.concatenate(pair) for pair in zip(cols, swept, strict=True)]
        cols, copies = _distinct(cols)
        counts = self.match_counts(*cols[:4])
        host = cp.stack([*cols[:4], copies, *counts.T, cols[4].astype(cp.int64)]).get()
        return (*host[:5], host[5:9].T, host[9])

    def sweep(self, R, Q, T):
        """Hits sorted by diagonal then R, extended exactly: device (score, rs, qs, len, tag) of
        those scoring >= hspthresh.  Every hit walks in parallel until it merges into the next
        hit's walk (chain_walks, `xdrop.resolve_chains`); diagonals where a walk ran CHAIN_CAP
        bases go to the one-thread-per-diagonal sweep (sweep_diagonals) instead."""
        o = self.ctx.options
        right, capped_r = self._chains(R, Q, 1)
        left, capped_l = self._chains(R[::-1], Q[::-1], -1)
        (mr, p_r), (ml, p_l) = right, (x[::-1] for x in left)
        score, pr, pl = mr + ml, p_r - R, R - p_l
        out = [score, R - pl, Q - pl, pr + pl]
        capped = capped_r | capped_l[::-1]
        if bool(capped.any()):
            edge, starts = _diagonal_edges(R, Q)
            group = cp.cumsum(edge) - 1
            bad = cp.zeros(len(starts) - 1, cp.bool_)
            bad[group[capped]] = True
            slow = cp.flatnonzero(bad[group])
            for dst, src in zip(out, self._sweep_serial(R[slow], Q[slow]), strict=True):
                dst[slow] = src
        keep = out[0] >= o.hspthresh
        return [x[keep] for x in (*out, T)]

    def _chains(self, R, Q, direction: int):
        """chain_walks in one direction over hits in that direction's order: ((best, position of
        the best) per hit, whether its walk was capped)."""
        o, n = self.ctx.options, len(R)
        R, Q = cp.ascontiguousarray(R), cp.ascontiguousarray(Q)
        state = cp.empty(n, cp.uint8)
        best, pos, off = (cp.empty(n, cp.int64) for _ in range(3))
        _kernel(self.ctx.shape, "finish", "chain_walks")(
            _grid(n),
            (BLOCK,),
            (
                self.dref.score,
                self.qscore,
                np.int64(self.dref.len),
                np.int64(self.qlen),
                self.mat,
                np.int32(o.xdrop),
                R,
                Q,
                np.int64(n),
                np.int32(direction),
                np.int64(CHAIN_CAP),
                state,
                best,
                pos,
                off,
            ),
        )
        return xdrop.resolve_chains(cp, state == 1, best, pos, off), state == 2

    def _sweep_serial(self, R, Q):
        """sweep_diagonals: (score, rs, qs, len) of hits sorted by diagonal then R."""
        o = self.ctx.options
        _, starts = _diagonal_edges(R, Q)
        n, groups = len(R), len(starts) - 1
        out = [cp.empty(n, cp.int64) for _ in range(4)]
        scratch = cp.empty(cuda_source.SCRATCH * n, cp.int64)
        _kernel(self.ctx.shape, "finish", "sweep_diagonals")(
            (max(1, -(-groups // SWEEP_BLOCK)),),
            (SWEEP_BLOCK,),
            (
                self.dref.score,
                self.qscore,
                np.int64(self.dref.len),
                np.int64(self.qlen),
                self.mat,
                np.int32(o.xdrop),
                R,
                Q,
                starts,
                np.int64(groups),
                scratch,
                np.int64(n),
                *out,
            ),
        )
        return out

    def match_counts(self, total, rs, qs, ln):
        """Per row, the four match counts the entropy gate needs (zero where it looks at none)."""
        o = self.ctx.options
        counts = cp.zeros((len(total), 4), cp.int64)
        if o.entropy and len(total):
            _kernel(self.ctx.shape, "finish", "match_counts")(
                _grid(len(total)),
                (BLOCK,),
                (
                    self.dref.score,
                    self.qscore,
                    total,
                    rs,
                    qs,
                    ln,
                    np.int64(len(total)),
                    np.int64(o.hspthresh),
                    np.int64(3 * o.hspthresh),
                    counts,
                ),
            )
        return counts

    def ref_order(self, h0: int, n: int, shift: int):
        """Hits [h0, h0 + n) as (r << 32 | q) with their tags, counting-sorted by reference
        window of 2**shift bases."""
        r = cp.empty(n, cp.uint32)
        hist = cp.zeros((self.dref.len >> shift) + 1, cp.uint32)
        bseed = self._block_seeds(h0, n)
        _kernel(self.ctx.shape, "extend", "hit_refs")(
            _grid(n),
            (BLOCK,),
            (
                self.dref.pos_table,
                self.lo,
                self.cum,
                self.counts,
                bseed,
                np.int64(h0),
                np.int64(n),
                np.int32(shift),
                r,
                hist,
            ),
        )
        cursor = cp.cumsum(hist, dtype=cp.uint32) - hist
        pairs, tags = cp.empty(n, cp.uint64), cp.empty(n, cp.uint32)
        _kernel(self.ctx.shape, "extend", "scatter_hits")(
            _grid(n),
            (BLOCK,),
            (
                r,
                self.cum,
                bseed,
                _ptr(self.qpos),
                np.int64(self.first),
                np.int32(self.variants),
                self.chunk_start,
                np.int32(len(self.chunk_start)),
                np.int64(h0),
                np.int64(n),
                np.int32(shift),
                cursor,
                pairs,
                tags,
            ),
        )
        return pairs, tags


def _filter_kernel(ctx: Context) -> tuple[str, int]:
    """(the filter kernel, hits a thread): DEFAULT_FILTER or HSPZ_GPU_FILTER's, its WIDE form
    where its 16-bit halves would not hold every sum a walk of CAP bases reaches."""
    kernel, per_thread = FILTERS[_state.get("filter") or DEFAULT_FILTER]
    best = max(int(ctx.matrix.max()), 0)
    if kernel in WIDE and not (ctx.options.xdrop < HALF - 8 and CAP * best < HALF):
        kernel = WIDE[kernel]
    if kernel in SEED_KERNELS and not xdrop.seed_bound_table_fits(ctx.matrix, ctx.shape.size):
        kernel = SEED_KERNELS[kernel]
    return kernel, per_thread


def _pack(R, Q):
    if FUSED:
        return _fused("pack")(R, Q)
    return (R.astype(cp.uint64) << np.uint64(32)) | Q.astype(cp.uint64)


def _unpack(pairs):
    if FUSED:
        return _fused("unpack")(pairs)
    return (
        (pairs >> np.uint64(32)).astype(cp.int64),
        (pairs & np.uint64(0xFFFFFFFF)).astype(cp.int64),
    )


# FUSED's kernels: each does in one launch what the CuPy expressions it stands for do in two to
# six (positions and lengths are below 2**32, as everywhere `_pack` is used).  Their types are
# strict: CuPy refuses an argument of another dtype, where the expressions took any integers.
_FUSED = {
    "pack": (
        "int64 r, int64 q",
        "uint64 p",
        "p = ((unsigned long long)r << 32) | (unsigned long long)q",
    ),
    "unpack": (
        "uint64 p",
        "int64 r, int64 q",
        "r = (long long)(p >> 32); q = (long long)(p & 0xFFFFFFFFULL)",
    ),
    # by_diagonal's sort key: (R - Q + qlen) << 32 | R
    "diagonal_key": (
        "uint64 p, int64 qlen",
        "uint64 key",
        "key = (((p >> 32) - (p & 0xFFFFFFFFULL) + (unsigned long long)qlen) << 32) | (p >> 32)",
    ),
    # R, Q and the tag of each hit in sorted order
    "sorted_hits": (
        "int64 o, raw uint64 P, raw X tags",
        "int64 r, int64 q, X t",
        "unsigned long long p = P[o]; r = (long long)(p >> 32); "
        "q = (long long)(p & 0xFFFFFFFFULL); t = tags[o]",
    ),
}


@functools.cache
def _fused(name: str) -> Any:
    ins, outs, body = _FUSED[name]
    return cp.ElementwiseKernel(ins, outs, body, f"hspz_{name}")


def by_diagonal(
    late: cp.ndarray, tag: cp.ndarray, ref_len: int, qlen: int
) -> tuple[cp.ndarray, cp.ndarray, cp.ndarray]:
    """Device hits (r << 32 | q) and their tags as (R, Q, tag), sorted by diagonal R - Q, then
    R (tags ride along: which walk takes a hit never changes its result)."""
    if len(late) < 2:
        return (*_unpack(late), tag)
    fits = ref_len + qlen < 2**32  # the radix key (diagonal + qlen) << 32 | R does not overflow
    if fits and FUSED:
        order = cp.argsort(_fused("diagonal_key")(late, np.int64(qlen)))
        return _fused("sorted_hits")(order, late, tag)
    R, Q = _unpack(late)
    if fits:  # one radix sort of (diagonal + qlen) << 32 | R
        key = (R - Q + qlen).astype(cp.uint64) << np.uint64(32)
        order = cp.argsort(key | (late >> np.uint64(32)))
    else:
        order = cp.lexsort(cp.stack((R, R - Q)))
    return R[order], Q[order], tag[order]


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


def _distinct(cols):
    """Device rows (score, rs, qs, len, tag) with identical (rs, qs, len, tag) once each, sorted
    by (tag, rs, qs, len), and how many copies each had.  Hits on one walk give the same HSP
    many times; its score is a function of (rs, qs, len), so the gate passes or fails the
    copies alike and dedup keeps one either way (the raw dump repeats them)."""
    n = len(cols[0])
    if n == 0:
        return cols, cp.zeros(0, cp.int64)
    low = np.uint64(0xFFFFFFFF)  # positions, lengths and tags are below 2**32
    _, rs, qs, ln, tag = ((c.astype(cp.uint64) & low) for c in cols)
    minor, major = (qs << np.uint64(32)) | ln, (tag << np.uint64(32)) | rs
    order = cp.argsort(minor)  # stable: two passes sort by (major, minor)
    order = order[cp.argsort(major[order])]
    minor, major = minor[order], major[order]
    new = cp.concatenate(
        (cp.ones(1, cp.bool_), (minor[1:] != minor[:-1]) | (major[1:] != major[:-1]))
    )
    at = cp.flatnonzero(new)
    copies = cp.diff(cp.concatenate((at, cp.asarray([n], at.dtype))))
    return [c[order[at]] for c in cols], copies


def host_finish(ctx: Context, rows: tuple, n_chunks: int) -> list[tuple]:
    """Host half of one group (on a thread): the entropy gate from the device's match counts,
    then `settle_chunks`: each semantic chunk's settled HSPs."""
    o = ctx.options
    total, rs, qs, ln, copies, counts, chunk = rows
    gated, keep = hsp.gate_by_counts(total, rs, qs, ln, counts, o.hspthresh, o.entropy)
    return settle_chunks(ctx, gated, copies[keep], chunk[keep], n_chunks)


class _Part:
    """Chunk i's share of a group's host half (one future for all the group's chunks)."""

    def __init__(self, future, i: int):
        self.future, self.i = future, i

    def result(self) -> tuple:
        return self.future.result()[self.i]


class _GroupRun:
    """One group of seed batches on its way through the device: its `_Group` (seed stream, hit
    sums, semantic chunks) and the survivors of the pieces walked so far."""

    def __init__(
        self,
        ctx: Context,
        ref: RefBin,
        qry: QueryBin,
        jobs: list,
        walk_full: bool,
        host_seeds: list | None,
    ):
        self.g = _Group(
            ctx,
            _device_ref(ctx, ref),
            qry,
            _device_query(ctx, qry),
            jobs[0][1],
            [chunk for _, _, chunk in jobs],
            host_seeds,
        )
        self.per_seed_batch = self.g.semantic_chunks(ctx.options.max_hits, walk_full)
        self.g.use_chunks([h_a for chunks in self.per_seed_batch for h_a, _ in chunks])
        self.pieces: list = []

    def finish(self, submit: Callable[..., Future]) -> list[tuple[SeedBatchOut, list[_Part]]]:
        """Per seed batch, (counts, its semantic chunks' shares of the group's host half,
        `submit(host_finish, ...)`)."""
        g, per_seed_batch = self.g, self.per_seed_batch
        empty = np.empty(0, np.int64)
        rows = (
            g.finish(self.pieces)
            if self.pieces
            else (*[empty] * 5, np.empty((0, 4), np.int64), empty)
        )
        self.pieces = []  # the survivors' device arrays go before the next group is made
        done = submit(host_finish, g.ctx, rows, sum(map(len, per_seed_batch)))
        out, c = [], 0
        for b, chunks in enumerate(per_seed_batch):
            hits = int(g.hit_edges[b + 1] - g.hit_edges[b])
            out.append(
                (
                    SeedBatchOut(seeds=g.n_seeds[b], hits=hits),
                    [_Part(done, c + i) for i in range(len(chunks))],
                )
            )
            c += len(chunks)
        return out


def run_groups(
    ctx: Context,
    ref: RefBin,
    qry: QueryBin,
    groups: Iterable[tuple[list, list | None]],
    walk_full: bool,
    buckets: int | None,
    submit: Callable[..., Future],
    piece: int = PIECE,
    ahead: int = 0,
    filter_stream: cp.cuda.Stream | None = None,
) -> Iterator[list[tuple[SeedBatchOut, list[_Part]]]]:
    """Device halves of groups of seed batches ((jobs, the CPU seeder's streams or None) each),
    in order: per group what `_GroupRun.finish` returns.

    The pieces of all groups form one sequence.  Each piece's filter is launched (on
    `filter_stream`, or the current stream) `ahead` pieces before the piece is walked, and a
    group is finished once its last piece is walked; the next group's seed stream is made when
    its first piece is launched.  With a filter stream and ahead > 0, the device runs the next
    filter while this one thread walks, sorts and finishes on the current stream, whose small
    launches and synchronisations would otherwise leave it idle.  ahead = 0: each piece is
    filtered and walked in turn."""
    # (group, its piece's launched filter, what to yield once the piece is walked: its group
    # finished, after its last piece, and the finished groups without hits launched after it)
    queue: deque = deque()

    def walked(keep: int) -> Iterator[list]:
        while len(queue) > keep:
            run, filtered, after = queue.popleft()
            run.pieces.append(run.g.survivors(filtered))
            del run, filtered  # held by no name while the next piece is walked
            yield from (out() for out in after)

    for jobs, host_seeds in groups:
        run = _GroupRun(ctx, ref, qry, jobs, walk_full, host_seeds)
        total = run.g.total
        if not total:  # finished now (no device work), its seed stream freed; yielded in turn
            outs = run.finish(submit)
            if not queue:
                yield outs
            else:
                queue[-1][2].append(lambda outs=outs: outs)
        for h0 in range(0, total, piece):
            h1 = min(h0 + piece, total)
            after = [functools.partial(run.finish, submit)] if h1 == total else []
            queue.append((run, run.g.launch_filter(h0, h1, buckets, filter_stream), after))
            yield from walked(ahead)
        del run  # a group lives on in the queue only
    yield from walked(0)


def _host_of(seeds: Iterator, group: list[int]) -> list | None:
    """The CPU seeder's streams of a group's seed batches (None where the device seeds)."""
    host = [next(seeds) for _ in group]
    return None if host[0] is None else host


def _in_slot(slots: threading.Semaphore, fn: Callable, *args: object) -> object:
    with slots:
        return fn(*args)


def _group_bases(ctx: Context) -> int:
    """Window starts per group: GROUP_BASES, less where device memory is short (a quarter of
    what is free, for the group's seed stream: lo, counts and their prefix sum; shared by the
    1 + AHEAD groups whose seed streams `run_groups` may hold at once)."""
    variants = ctx.shape.weight + 1 if ctx.options.transition else 1
    share = _free_bytes() // (4 * (1 + AHEAD))
    return max(1, min(GROUP_BASES, share // (16 * variants + 9)))


def _free_bytes() -> int:
    """Free device memory, counting what CuPy's pool holds unused (earlier units' arrays)."""
    return cp.cuda.runtime.memGetInfo()[0] + cp.get_default_memory_pool().free_bytes()


def _piece_hits() -> int:
    """Hits per piece: PIECE, less where a quarter of the free device memory would not hold
    PIECE_BYTES a hit, and AHEAD more pieces' filter inputs and outputs (AHEAD_BYTES a hit)."""
    per_hit = PIECE_BYTES + AHEAD * AHEAD_BYTES
    return min(PIECE, max(1 << 16, _free_bytes() // 4 // per_hit))


def run_unit(
    ctx: Context, ref: RefBin, qry: QueryBin, ordinal: int, progress: Progress | None = None
) -> UnitResult:
    """Every seed batch of the unit on the current device, in groups (`seed_batch_groups`), the host
    halves overlapping on threads; `progress` hears of each group's seed batches as its device half
    returns.  With AHEAD, the filters run on a stream of their own, launched ahead (`run_groups`).

    (One launching thread: device halves on several streams with a launching thread each
    measured slower on the H200 twice, when the host halves held the launching threads up and
    in issue 27's trial, where the filter kernels slowed each other; so did a helper thread
    making the next group, its launches taking the GIL from the launching thread: BENCHMARKS.md,
    "GPU ns per seed hit (H200)".)"""
    k = knobs.read()
    _state["filter"] = k.gpu_filter
    dref = _device_ref(ctx, ref)
    if not AHEAD:
        return _unit_pipeline(ctx, ref, qry, ordinal, progress, k, dref, None)
    launch, filters = _streams()
    launch.wait_event(_mark(cp.cuda.get_current_stream()))  # what made the bins
    try:
        with launch:
            return _unit_pipeline(ctx, ref, qry, ordinal, progress, k, dref, filters)
    except BaseException:
        # no filter left running on arrays the raise frees (the raise's error is the one told)
        with contextlib.suppress(cp.cuda.runtime.CUDARuntimeError):
            filters.synchronize()
        raise


_local = threading.local()
PRIORITY = True  # the launching stream at the device's greatest priority, the filter's at the
# least: the block scheduler then dispatches a walk's or sort's blocks as soon as a filter block
# retires, where at equal priority they waited behind the whole filter grid (then AHEAD gained
# nothing: simM 0.0994 against 0.0999 ns/hit at AHEAD 0; PRIORITY off 0.1030 against 0.0743)


def _streams() -> tuple:
    """This thread's (launching stream, filter stream) on the current device, made once: CuPy's
    memory pool keeps freed blocks per stream, so fresh streams each unit would strand them."""
    made = _local.__dict__.setdefault("streams", {})
    key = (cp.cuda.Device().id, PRIORITY)
    if key not in made:
        # CUDA clamps a priority to the device's range (lower is sooner; 0 the least)
        made[key] = tuple(
            cp.cuda.Stream(non_blocking=True, priority=p) for p in ((-100 if PRIORITY else 0), 0)
        )
    return made[key]


def _unit_pipeline(
    ctx: Context,
    ref: RefBin,
    qry: QueryBin,
    ordinal: int,
    progress: Progress | None,
    k: knobs.Knobs,
    dref: DeviceRef,
    filter_stream,
) -> UnitResult:
    """run_unit's body on the current stream, the filters on `filter_stream` (None: the
    current one) AHEAD pieces ahead."""
    buckets = k.bucket_shift if knobs.buckets_on(k, dref.len) else None
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    t0 = time.perf_counter()
    start.record()
    jobs = unit_seed_batches(ctx, qry)
    bases = _group_bases(ctx)
    groups = seed_batch_groups(jobs, bases, max(1, bases // HEAD))
    piece = _piece_hits()
    if _use_device_seeder():
        seeds = iter([None] * len(jobs))
    else:  # the CPU seeder runs ahead of the device on host threads; it needs counts only
        table = SeedTable(dref.index_table.get(), np.empty(0, np.uint32))
        seeds = _prefetched(
            lambda j: _host_seeds(ctx, table, qry, j[1], j[2]), jobs, _state["threads"]
        )
    threads = _state["threads"]
    slots = threading.Semaphore(min(threads, HOST_THREADS))
    with ThreadPoolExecutor(max_workers=threads) as pool:
        # mypy's partial wants submit's fn and its arguments now; they come at each call
        submit = functools.partial(pool.submit, _in_slot, slots)  # type: ignore[call-arg]
        pending = []
        tally = SeedBatchTally(len(jobs), progress)
        # taken in order, each group's host seeds as the pipeline reaches it
        items = (([jobs[i] for i in group], _host_of(seeds, group)) for group in groups)
        ahead = AHEAD if filter_stream is not None else 0
        halves = run_groups(
            ctx, ref, qry, items, k.chunk_walk_full, buckets, submit, piece, ahead, filter_stream
        )
        for group, outs in zip(groups, halves, strict=True):
            pending += outs
            tally(SeedBatchOut(hits=sum(out.hits for out, _ in outs)), len(group))
        stop.record()
        if threads > HOST_THREADS:  # nothing left to launch: every thread takes host halves
            slots.release(threads - HOST_THREADS)
        seed_batch_outs = []
        for (_, strand, _), (out, futures) in zip(jobs, pending, strict=True):
            for f in futures:
                record_chunk(out, f.result(), strand)
            seed_batch_outs.append(out)
    stop.synchronize()
    result = assemble(UnitResult(ordinal, ref.index, qry.index), jobs, seed_batch_outs)
    result.engine_ms = cp.cuda.get_elapsed_time(start, stop)
    result.device = cp.cuda.Device().id
    result.host_start_ms = t0 * 1e3
    result.host_end_ms = time.perf_counter() * 1e3
    return result


class GpuBackend:
    """The GPU backend as one object (`hspz.engine.contract.Backend`): this module's functions;
    bins need no host codes, reference bins load straight to the device.  Making it imports no
    CuPy (the module's `cp` does, on the first call that needs it)."""

    name = "gpu"
    capabilities = Capabilities(on_device=True, host_codes=HOST_CODES)

    def set_threads(self, threads: int) -> None:
        set_threads(threads)

    def use_device(self, device: int) -> None:
        use_device(device)

    def warm_worker(self, worker: int) -> None:
        warm_worker(worker)

    def prepare_reference(self, ctx: Context, index: int, records: list[Record]) -> RefBin:
        return prepare_reference(ctx, index, records, self.capabilities.host_codes)

    def prepare_query(self, ctx: Context, index: int, records: list[Record]) -> QueryBin:
        return prepare_query(ctx, index, records, self.capabilities.host_codes)

    def load_reference(self, ctx: Context, index: Index, b: int, threads: int = 0) -> RefBin:
        return load_reference(ctx, index, b, threads)

    def run_unit(
        self,
        ctx: Context,
        ref: RefBin,
        qry: QueryBin,
        ordinal: int,
        progress: Progress | None = None,
    ) -> UnitResult:
        return run_unit(ctx, ref, qry, ordinal, progress)


BACKEND = GpuBackend()
