"""The CPU backend: the readable reference implementation of the Seed+Filter contract.

Per unit: for each interval, plus chunks then minus chunks; per chunk (one seed batch) the query
seeds that have hits, their hit counts, the semantic `--max-hits` walk, and per semantic chunk
hit expansion, x-drop extension (numba: a bound rejects most hits, long HSPs are swept once per
diagonal), the score/entropy gate and dedup.  A semantic chunk's hits are extended in pieces
of at most `PIECE` (`hit_pieces`), so host memory per thread does not grow with `--max-hits`;
dedup sorts the chunk's gated HSPs whole, so the pieces never change bytes.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections import deque
from collections.abc import Iterator

import numpy as np

from hspz.core import jit
from hspz.core.options import Options
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
    load_reference,
    prepare_query,
    prepare_reference,
    record_chunk,
    settle_chunks,
    unit_seed_batches,
)
from hspz.io.packing import COMPLEMENT
from hspz.io.records import Record
from hspz.stages import chunks as plan
from hspz.stages import hsp
from hspz.stages.seed import SeedShape, hit_seeds, query_seeds, start_codegen
from hspz.stages.xdrop import Workspace, first_pass, sweep_late

_threads = [1]
PIECE = 1 << 18  # most hits extended at once per thread: ~28 MiB (`plan.unit_bytes`), not bytes


def set_threads(threads: int) -> None:
    """`--threads`: 0 means every core."""
    _threads[0] = threads if threads > 0 else (os.cpu_count() or 1)


def warm_worker(worker: int) -> None:
    """Load numba (`hspz.core.jit` loads it on first use) while a pooled worker waits for its
    job."""
    jit.load()


def preload(options: Options | None = None) -> threading.Thread | None:
    """Load numba and start its code generator (`stages.seed.start_codegen`), before the caller
    imports the stages and reads (`engine.backends.warm`); given the run's options, then start
    taking the engine's loops from numba's cache too (`warm_loops`), on a daemon thread of its
    own, which is returned: nothing waits for it (with numba's cache empty it compiles the
    engine, seconds that a run without seeds never needed)."""
    jit.load()
    start_codegen()
    if options is None:
        return None
    # HOXD70 whatever --scoring says: the warm-up reads no user file
    ctx = Context.from_options(dataclasses.replace(options, scoring=None))
    ctx = dataclasses.replace(ctx, shape=SeedShape.from_pattern(WARM_SEED))
    thread = threading.Thread(target=_warm_quietly, args=(ctx,), daemon=True, name="hspz-warm")
    thread.start()
    return thread


def _warm_quietly(ctx: Context) -> None:
    try:
        warm_loops(ctx)
    except Exception:  # the engine's own first loop reports what is wrong
        pass


WARM_BASES = 3_000  # the warm-up's reference; its query is it and its reverse complement
# the warm-up's seed: the loops' argument types do not depend on the seed, and a weight of 8 keeps
# its table at 256 KiB (12of19's is 64 MiB, which a run's peak would have held twice)
WARM_SEED = "11011011011"
_seeding = threading.Event()  # a unit's seed batches begin (its table is built)


def warm_loops(ctx: Context) -> None:
    """One tiny seed batch a strand through the engine with the options of `ctx` (a random
    sequence against itself and its reverse complement: on either strand hits, a long HSP
    whose hits go to the sweep, records to gate and collapse), unless a unit's seed batches
    have begun: every loop a seed batch calls is taken from numba's cache by this thread, with
    the argument types a real seed batch passes.  Each loop's first call loads it under numba's
    compiler lock, so at -t 16 the engine's threads otherwise queued there at their first piece
    (0.11 s of a 3.4 s run, BENCHMARKS.md)."""
    if _seeding.is_set():
        return
    rng = np.random.default_rng(24)
    seq = np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, WARM_BASES)]
    back = COMPLEMENT[seq[::-1]]
    ref = prepare_reference(ctx, 0, [Record("warm", seq)])
    qry = prepare_query(ctx, 0, [Record("warm", np.concatenate((seq, back)))])  # HSPs both ways
    _ = ref.table.occupied
    firsts = {strand: chunk for _, strand, chunk in reversed(unit_seed_batches(ctx, qry))}
    for strand, chunk in firsts.items():
        run_seed_batch(ctx, ref, qry, strand, chunk)


PHASES = ("table", "seed", "first pass", "sweep", "gate", "dedup")


class PhaseClock:
    """Wall and CPU seconds of the engine's phases, per thread (`--time`): a thread's CPU time
    well under its wall time in a phase is time it waited (for the GIL, or for memory)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.threads: dict[int, dict[str, list[float]]] = {}
        self.local = threading.local()

    def mine(self) -> dict[str, list[float]]:
        ident = threading.get_ident()
        got = self.threads.get(ident)
        if got is None:
            with self.lock:
                got = self.threads.setdefault(ident, {p: [0.0, 0.0] for p in PHASES})
        return got

    def __call__(self, phase: str) -> Lap:
        """The context that adds its time to this thread's `phase` (one object a thread and
        phase: a piece passes through four of them, so no generator is made each time)."""
        laps = getattr(self.local, "laps", None)
        if laps is None:
            laps = self.local.laps = {p: Lap(acc) for p, acc in self.mine().items()}
        return laps[phase]

    def table(self) -> dict[str, list[tuple[float, float]]]:
        """Per phase, (wall, CPU) seconds of each thread, in the order the threads started."""
        rows = list(self.threads.values())
        return {p: [(r[p][0], r[p][1]) for r in rows] for p in PHASES}


class Lap:
    """`with lap:` adds the block's wall and CPU seconds to `acc` (not reentrant)."""

    __slots__ = ("acc", "cpu", "wall")

    def __init__(self, acc: list[float]):
        self.acc = acc
        self.wall = self.cpu = 0.0

    def __enter__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.thread_time()

    def __exit__(self, *exc: object) -> None:
        self.acc[0] += time.perf_counter() - self.wall
        self.acc[1] += time.thread_time() - self.cpu


_local = threading.local()


def workspace() -> Workspace:
    """This thread's first-pass buffers (`xdrop.Workspace`), made on its first piece."""
    work = getattr(_local, "work", None)
    if work is None:
        work = _local.work = Workspace()
    return work


def chunk_hsps(
    ctx: Context,
    ref: RefBin,
    qry: QueryBin,
    strand: str,
    qpos: np.ndarray,
    lo: np.ndarray,
    counts: np.ndarray,
    clock: PhaseClock | None = None,
) -> np.ndarray:
    """Extend every hit of one semantic chunk's seeds and gate them: raw HSP records
    (`xdrop.extend_seeds`: the first pass, then the diagonal sweep of the hits it left)."""
    o, clock = ctx.options, clock or PhaseClock()
    r, q = ref.score, qry.score[strand]
    r_len, q_len = ref.packed.block_len, qry.packed[strand].block_len
    work = workspace()
    with clock("first pass"):
        done, late = first_pass(
            r,
            q,
            r_len,
            q_len,
            ctx.matrix,
            o.xdrop,
            ref.table.pos_table,
            lo,
            qpos,
            counts,
            ctx.shape.size,
            o.hspthresh,
            work,
        )
    with clock("sweep"):
        total, rs, qs, ln = sweep_late(
            r, q, r_len, q_len, ctx.matrix, o.xdrop, done, late, o.hspthresh, work
        )
    with clock("gate"):
        return hsp.gate(r, q, total, rs, qs, ln, o.hspthresh, o.entropy)


def run_seed_batch(
    ctx: Context,
    ref: RefBin,
    qry: QueryBin,
    strand: str,
    chunk: tuple[int, int],
    clock: PhaseClock | None = None,
) -> SeedBatchOut:
    """One seed batch (wga chunk): seeds, hits, semantic chunks, each extended and deduped."""
    o, clock = ctx.options, clock or PhaseClock()
    with clock("seed"):
        n_seeds, qpos, lo, counts, at, hits = hit_seeds(
            qry.seed[strand], ctx.shape, chunk[0], chunk[1], o.transition, ref.table, workspace()
        )
        chunks = semantic_chunks(n_seeds, counts, at, o.max_hits, total=hits)
    out = SeedBatchOut(seeds=n_seeds, hits=hits)
    for a, b in chunks:
        pieces = (
            hit_pieces(qpos, lo, counts, a, b - 1, PIECE)
            if b > a
            else [(qpos[a:b], lo[a:b], counts[a:b])]
        )  # settled, empty: gated once
        parts = []
        for piece in pieces:
            raw = chunk_hsps(ctx, ref, qry, strand, *piece, clock=clock)
            with clock("dedup"):
                parts.append(hsp.collapse(raw))
        with clock("dedup"):
            finish_collapsed(ctx, parts, out, strand)
    return out


def finish_collapsed(ctx: Context, parts: list, out: SeedBatchOut, strand: str) -> None:
    """`engine.finish_chunk` of one semantic chunk given as pieces of collapsed records
    (`hsp.collapse`: distinct records and their copies), collapsed again across the pieces:
    the same counts, dump and survivors as the whole chunk's records."""
    record_chunk(out, settled_chunk(ctx, parts), strand)


def settled_chunk(ctx: Context, parts: list) -> tuple:
    """`engine.settle` of one semantic chunk given as its pieces' collapsed records, in order."""
    if len(parts) == 1:
        raw, copies = parts[0]
    else:
        raw, copies = hsp.collapse(
            np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        )
    return settle_chunks(ctx, raw, copies, np.zeros(len(raw), np.int64), 1)[0]


def hit_pieces(
    qpos: np.ndarray,
    lo: np.ndarray,
    counts: np.ndarray,
    s0: int,
    s1: int,
    piece: int,
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The hits of seeds s0..s1 (one semantic chunk) as (qpos, lo, counts) pieces of at most
    `piece` hits each, in hit order (`piece_bounds`); a seed whose hits straddle a piece
    boundary is split (its first index into `pos_table` moved, its count cut).  The pieces are
    views: the split seeds are edited in place while their piece is out and restored before the
    next one (`lo` and `counts` belong to one seed batch, so no other thread sees them), which
    keeps a piece from copying its seeds."""
    for i, j, skip, cut in piece_bounds(counts, s0, s1, piece):
        saved = lo[i], counts[i], counts[j]
        lo[i] += skip
        counts[i] -= skip
        counts[j] -= cut
        try:
            yield qpos[i : j + 1], lo[i : j + 1], counts[i : j + 1]
        finally:  # in reverse: when i == j, both saved counts are the seed's own
            counts[j] = saved[2]
            lo[i], counts[i] = saved[0], saved[1]


def piece_bounds(
    counts: np.ndarray, s0: int, s1: int, piece: int
) -> list[tuple[int, int, int, int]]:
    """`hit_pieces`'s pieces as (first seed i, last seed j, hits of seed i before the piece,
    hits of seed j after it); a chunk without hits is one piece of its seeds, nothing cut.
    One walk over the chunk's counts (`_piece_walk`): no prefix sum of the seed batch, whose
    8 B a seed each thread wrote, read and kept beside its seeds."""
    total = _hits_of(counts, s0, s1)
    if total == 0:  # a chunk without hits still goes through the gate once
        return [(s0, s1, 0, 0)]
    out = np.empty((-(-total // piece), 4), np.int64)
    _piece_walk(counts, s0, piece, total, out)
    return [(int(i), int(j), int(skip), int(cut)) for i, j, skip, cut in out]


@jit.njit
def _hits_of(counts, s0, s1):
    total = 0
    for s in range(s0, s1 + 1):
        total += int(counts[s])
    return total


@jit.njit
def _piece_walk(counts, s0, piece, total, out):
    """`piece_bounds`'s rows for the `total` hits from seed s0 on, `piece` at most a row: each
    piece from the seed holding its first hit (zero-count seeds before it skipped) to the one
    holding its last (zero-count seeds between them kept)."""
    i, done, a, n = s0, 0, 0, 0  # seed i has `done` hits in earlier pieces
    while a < total:
        need = min(piece, total - a)
        while np.int64(counts[i]) == done:  # seed i has no hit left: the next one holds hit a
            i += 1
            done = 0
        j, used = i, done
        while np.int64(counts[j]) - used < need:
            need -= np.int64(counts[j]) - used
            j += 1
            used = 0
        used += need
        out[n, 0], out[n, 1], out[n, 2], out[n, 3] = i, j, done, np.int64(counts[j]) - used
        n += 1
        a += min(piece, total - a)
        i, done = j, used


def piece_copy(
    qpos: np.ndarray,
    lo: np.ndarray,
    counts: np.ndarray,
    bounds: tuple[int, int, int, int],
    work: Workspace,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One piece of `piece_bounds` as (qpos view, lo, counts), its split seeds edited in copies
    in this thread's `work`space (`lo` and `counts` stay as they are: other threads read them
    for the seed batch's other pieces)."""
    i, j, skip, cut = bounds
    n = j + 1 - i
    mine_lo = work.take("piece_lo", n, lo.dtype.type)
    mine_counts = work.take("piece_counts", n, counts.dtype.type)
    mine_lo[:] = lo[i : j + 1]
    mine_counts[:] = counts[i : j + 1]
    if n:
        mine_lo[0] += skip
        mine_counts[0] -= skip
        mine_counts[n - 1] -= cut
    return qpos[i : j + 1], mine_lo, mine_counts


def semantic_chunks(
    n_seeds: int,
    counts: np.ndarray,
    at: np.ndarray,
    max_hits: int,
    total: int | None = None,
) -> list[tuple[int, int]]:
    """`plan.chunk_walk` over a seed batch's whole stream of n_seeds seeds, given only the seeds
    with hits (`counts`, their places `at`): each chunk as a range of those seeds.  The others
    add nothing to a chunk, and a chunk of them alone still counts (it is settled, empty).  The
    whole stream's prefix sums step only at `at`, so the walk's searches run on the prefix sums
    of `counts` (no array of the whole stream: two of them, 52 MB a seed batch, were mapped and
    faulted in by every seed batch past --max-hits hits).  Given `total`, the seeds' hits, a
    batch under --max-hits is one chunk with no sum made at all."""
    if total is not None and total < max_hits:  # chunk_walk's single chunk, no sums needed
        return [(0, len(counts))] if n_seeds else []
    cum = np.cumsum(counts, dtype=np.int64)
    total = int(cum[-1]) if len(cum) else 0
    if total < max_hits:
        return [(0, len(counts))] if n_seeds else []
    ends, limit = [], max_hits
    for _ in range(total // max_hits):
        k = int(np.searchsorted(cum, limit, side="left"))  # the first seed reaching `limit`
        ends.append(int(at[k]) - 1 if k < len(at) else n_seeds - 1)
        limit = (int(cum[k - 1]) if k else 0) + max_hits
    ends.append(n_seeds - 1)
    walk, start = [], 0
    for end in ends:
        if start <= end:
            walk.append((start, end))
        start = max(start, end + 1)
    return [
        (int(np.searchsorted(at, s0)), int(np.searchsorted(at, s1, side="right")))
        for s0, s1 in walk
    ]


def run_unit(
    ctx: Context, ref: RefBin, qry: QueryBin, ordinal: int, progress: Progress | None = None
) -> UnitResult:
    """Every interval of the query bin against the reference bin, plus then minus per interval.

    Seed batches are independent, so they run on `--threads` threads (the numba kernels release the
    GIL); their outputs are put back in plan order, so the thread count never changes bytes.
    `progress(seed batches done, seed batches, seed hits so far)` is called as seed batches finish.
    """
    start = time.perf_counter()
    jobs = unit_seed_batches(ctx, qry)
    clock = PhaseClock()
    with clock("table"):  # the table and its occupancy bits, once, before the seed batches
        _ = ref.build_table(_threads[0]).occupied
    _seeding.set()
    tally = SeedBatchTally(len(jobs), progress)

    def one(job: tuple) -> SeedBatchOut:
        return tally(run_seed_batch(ctx, ref, qry, job[1], job[2], clock))

    if _threads[0] == 1:
        outs = [one(j) for j in jobs]
    else:
        outs = PieceQueue(ctx, ref, qry, jobs, clock, tally).run(_threads[0])
    result = assemble(UnitResult(ordinal, ref.index, qry.index), jobs, outs)
    result.engine_ms = (time.perf_counter() - start) * 1e3
    result.phases = clock.table()
    return result


class InFlight:
    """One seed batch being extended: its seeds (views into its owner's workspace, which seeds
    no other seed batch until this one is done), its semantic chunks' pieces still out, and each
    chunk's collapsed parts in piece order."""

    def __init__(
        self,
        strand: str,
        n_seeds: int,
        hits: int,
        seeds: tuple[np.ndarray, np.ndarray, np.ndarray],
        chunks: list,
    ):
        self.strand, self.seeds = strand, seeds
        self.out = SeedBatchOut(seeds=n_seeds, hits=hits)
        self.parts: list = [[None] * len(bounds) for bounds in chunks]
        self.left = [len(bounds) for bounds in chunks]
        self.settled: list = [None] * len(chunks)
        self.chunks_left = len(chunks)


class PieceQueue:
    """`run_unit`'s seed batches on several threads, shared out piece by piece: a thread seeds the
    next seed batch (in plan order) and queues its pieces (`piece_bounds`, one semantic chunk's hits
    each at most PIECE); a thread takes the oldest queued piece, from any seed batch, unless fewer
    than one per thread are queued and it is free to seed the next seed batch (`next_task`); the
    thread that ends a chunk's last piece settles the chunk, and the one that settles a
    seed batch's last chunk records it.  A thread seeds no new seed batch while its
    own is in flight (its seeds live in its workspace), so memory stays what the model says:
    one seed batch's seeds and one piece per thread.  The bytes are the one-thread run's: each
    chunk's parts are collapsed in piece order, each seed batch's chunks recorded in order."""

    def __init__(
        self,
        ctx: Context,
        ref: RefBin,
        qry: QueryBin,
        jobs: list,
        clock: PhaseClock,
        tally: SeedBatchTally,
    ):
        self.ctx, self.ref, self.qry, self.jobs = ctx, ref, qry, jobs
        self.clock, self.tally = clock, tally
        self.outs: list = [None] * len(jobs)
        self.queue: deque = deque()
        self.next_job = self.seeding = 0
        self.threads = 1
        self.failed: BaseException | None = None
        self.cond = threading.Condition()

    def run(self, threads: int) -> list[SeedBatchOut]:
        self.threads = threads
        workers = [threading.Thread(target=self.worker, daemon=True) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        if self.failed is not None:
            raise self.failed
        return self.outs

    def worker(self) -> None:
        mine: list = [None]  # this thread's seed batch in flight
        try:
            while True:
                task = self.next_task(mine)
                if task is None:
                    return
                if task[0] == "seed":
                    self.seed(task[1], mine)
                else:
                    self.piece(*task[1:])
        except BaseException as exc:  # every thread stops; run() raises it
            with self.cond:
                self.failed = self.failed or exc
                self.cond.notify_all()

    def next_task(self, mine: list) -> tuple | None:
        """A thread's next task: seed the next seed batch where its own is done and fewer pieces
        than threads are queued (so that the queue does not run dry while seed batches are seeded),
        else the oldest queued piece; None when nothing is left for it."""
        with self.cond:
            while self.failed is None:
                own = mine[0]
                free = own is None or own.chunks_left == 0
                if free:
                    mine[0] = None
                more = self.next_job < len(self.jobs)
                if free and more and len(self.queue) < self.threads:
                    self.next_job += 1
                    self.seeding += 1
                    return ("seed", self.next_job - 1)
                if self.queue:
                    return self.queue.popleft()
                if free and self.seeding == 0 and not more:  # no seed batch is left to queue pieces
                    return None
                self.cond.wait()
            return None

    def seed(self, index: int, mine: list) -> None:
        o, clock = self.ctx.options, self.clock
        _, strand, chunk = self.jobs[index]
        with clock("seed"):
            work = workspace()
            n_seeds, qpos, lo, counts, at, hits = hit_seeds(
                self.qry.seed[strand],
                self.ctx.shape,
                chunk[0],
                chunk[1],
                o.transition,
                self.ref.table,
                work,
            )
            chunks = semantic_chunks(n_seeds, counts, at, o.max_hits, total=hits)
            bounds = [
                piece_bounds(counts, a, b - 1, PIECE) if b > a else [(a, a - 1, 0, 0)]
                for a, b in chunks
            ]
        seed_batch = InFlight(strand, n_seeds, hits, (qpos, lo, counts), bounds)
        with self.cond:
            self.seeding -= 1
            if chunks:
                mine[0] = seed_batch
                self.queue.extend(
                    ("piece", index, seed_batch, c, k, b)
                    for c, chunk_bounds in enumerate(bounds)
                    for k, b in enumerate(chunk_bounds)
                )
            else:
                self.outs[index] = seed_batch.out
            self.cond.notify_all()
        if not chunks:
            self.tally(seed_batch.out)

    def piece(
        self, index: int, seed_batch: InFlight, c: int, k: int, bounds: tuple[int, int, int, int]
    ) -> None:
        clock = self.clock
        qpos, lo, counts = piece_copy(*seed_batch.seeds, bounds, workspace())
        raw = chunk_hsps(
            self.ctx, self.ref, self.qry, seed_batch.strand, qpos, lo, counts, clock=clock
        )
        with clock("dedup"):
            part = hsp.collapse(raw)
        with self.cond:
            seed_batch.parts[c][k] = part
            seed_batch.left[c] -= 1
            last = seed_batch.left[c] == 0
        if not last:
            return
        with clock("dedup"):
            settled = settled_chunk(self.ctx, seed_batch.parts[c])
        seed_batch.parts[c] = None
        with self.cond:
            seed_batch.settled[c] = settled
            seed_batch.chunks_left -= 1
            done = seed_batch.chunks_left == 0
        if done:  # the seed batch's other chunks are settled: this thread alone sees it now
            for one in seed_batch.settled:
                record_chunk(seed_batch.out, one, seed_batch.strand)
            self.outs[index] = self.tally(seed_batch.out)
        with self.cond:  # its owner may seed again
            self.cond.notify_all()


def count_unit(ctx: Context, ref: RefBin, qry: QueryBin) -> tuple[int, int]:
    """(seeds, hits) of one unit without extending anything (`--cpu-only`)."""
    o, size = ctx.options, ctx.shape.size
    seeds = hits = 0
    for iv in plan.intervals(qry.block_len, size, o.interval_size):
        for strand in ctx.strands:
            span = iv if strand == "plus" else plan.minus_interval(iv, qry.block_len, size)
            for chunk in plan.wga_chunks(span, o.wga_chunk_size):
                kmers, _ = query_seeds(
                    qry.seed[strand], ctx.shape, chunk[0], chunk[1], o.transition
                )
                seeds += len(kmers)
                hits += int(ref.table.counts(kmers).sum())
    return seeds, hits


class CpuBackend:
    """The CPU backend as one object (`hspz.engine.contract.Backend`): this module's functions;
    one device (the host), reference bins loaded into host memory."""

    name = "cpu"
    capabilities = Capabilities(on_device=False, host_codes=True)

    def set_threads(self, threads: int) -> None:
        set_threads(threads)

    def use_device(self, device: int) -> None:
        """The host is the only device: nothing to bind."""

    def warm_worker(self, worker: int) -> None:
        warm_worker(worker)

    def prepare_reference(self, ctx: Context, index: int, records: list[Record]) -> RefBin:
        return prepare_reference(ctx, index, records, self.capabilities.host_codes, _threads[0])

    def prepare_query(self, ctx: Context, index: int, records: list[Record]) -> QueryBin:
        return prepare_query(ctx, index, records, self.capabilities.host_codes, _threads[0])

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


BACKEND = CpuBackend()
