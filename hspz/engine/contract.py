"""The Seed+Filter contract shared by both backends.

`prepare_reference` and `prepare_query` turn records into the packed arrays a backend needs;
`Backend` is what a backend offers the workers (`run_unit(ctx, ref, qry, unit) -> UnitResult`,
loading, preparing, its device and threads, and its `Capabilities`): `engine.cpu.BACKEND` and
`engine.gpu.BACKEND` are the two objects that implement it.
A `UnitResult` holds, for each (interval, strand) of the unit, the chunk-ordered HSP records
(`hsp.HSP_DTYPE`, block-relative, minus lists NOT yet reversed) plus the unit's counts.
Nothing after the engine knows which backend ran.
"""

from __future__ import annotations

import functools
import io
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol, runtime_checkable

import numpy as np

from hspz.core.errors import sigterm_held
from hspz.core.options import Options
from hspz.core.scoring import resolve_matrix
from hspz.io.packing import (
    PackedBin,
    both_codes,
    pack_bin,
    reverse_complement,
    score_codes,
    seed_codes,
)
from hspz.io.records import Record
from hspz.stages import chunks as plan
from hspz.stages.hsp import HSP_DTYPE, dedup_chunks, diagonal_permutation
from hspz.stages.seed import SeedShape, SeedTable, build_seed_table

# a loaded bin's source, an `hspz.formats.index.Index`: formats sits above the engine
# (docs: the layer table in tests/test_architecture.py), so the engine names it without an import
Index = Any

STRANDS = {"plus": ("plus",), "minus": ("minus",), "both": ("plus", "minus")}


@dataclass(frozen=True)
class Context:
    """What every unit of a run shares: options, seed shape, scoring matrix."""

    options: Options
    shape: SeedShape
    matrix: np.ndarray  # int32 8x8
    keep_raw: bool = False

    @classmethod
    def from_options(cls, options: Options, keep_raw: bool = False) -> Context:
        shape = SeedShape.from_pattern(options.pattern)
        matrix = resolve_matrix(options.xdrop, options.scoring, options.ambiguous)
        return cls(options, shape, matrix, keep_raw)

    @property
    def strands(self) -> tuple[str, ...]:
        return STRANDS[self.options.strand]


@dataclass
class RefBin:
    """A packed reference bin; its score codes and seed table are made on first use (the GPU
    backend makes its own on the device).  A bin loaded from an index (`load_reference`) has no
    bases, only its block length: its score codes and table come from the index, verified."""

    index: int
    packed: PackedBin
    shape: SeedShape
    step: int
    _table: SeedTable | None = None
    source: Index | None = None  # the index a loaded bin came from

    @functools.cached_property
    def score(self) -> np.ndarray:
        return score_codes(self.packed.buf)

    @property
    def table(self) -> SeedTable:
        return self.build_table()

    def build_table(self, threads: int = 1) -> SeedTable:
        """The seed table: from the index, else built (on `threads` threads) on first use."""
        if self._table is None and self.source is not None:
            self._table = self.source.table(self.index)
        if self._table is None:
            codes = seed_codes(self.packed.buf, threads)
            self._table = build_seed_table(
                codes, self.packed.block_len, self.shape, self.step, threads
            )
        return self._table


@dataclass
class QueryBin:
    """A packed query bin per strand; its seed and score codes are made on first use."""

    index: int
    packed: dict[str, PackedBin]

    @functools.cached_property
    def _codes(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        return {s: both_codes(p.buf) for s, p in self.packed.items()}

    @functools.cached_property
    def seed(self) -> dict[str, np.ndarray]:
        return {s: c[0] for s, c in self._codes.items()}

    @functools.cached_property
    def score(self) -> dict[str, np.ndarray]:
        return {s: c[1] for s, c in self._codes.items()}

    @property
    def block_len(self) -> int:
        return self.packed["plus"].block_len


def prepare_reference(
    ctx: Context, index: int, records: list[Record], host_codes: bool = True, threads: int = 1
) -> RefBin:
    """The reference bin of these records; `host_codes` makes its score codes now.  Packing and
    codes run on up to `threads` threads."""
    packed = pack_bin(records, ctx.options.target_prefix, threads)
    ref = RefBin(index, packed, ctx.shape, ctx.options.step)
    if host_codes:
        ref.__dict__["score"] = score_codes(packed.buf, threads)  # the cached_property's value
    return ref


def load_reference(ctx: Context, index: Index, b: int, threads: int = 0) -> RefBin:
    """Reference bin b from an index (`hspz.formats.index.Index`) into host memory: its score
    codes and seed table, every piece checksum-verified as it is read (the CPU engine's load;
    the GPU engine loads straight to the device)."""
    loaded = index.load_host(b, threads)
    ref = RefBin(
        b,
        bases_free_bin(len(loaded.enc) - 1),
        ctx.shape,
        ctx.options.step,
        SeedTable(loaded.index_table, loaded.pos_table),
        index,
    )
    ref.__dict__["score"] = loaded.enc  # the cached_property's value
    return ref


def bases_free_bin(block_len: int) -> PackedBin:
    """A PackedBin standing for a loaded bin: its block length alone (the engine needs no more;
    the emitter takes record tables from the frozen plan)."""
    return PackedBin(
        np.empty(0, np.uint8), block_len, (), np.zeros(0, np.int64), np.zeros(0, np.int64)
    )


def prepare_query(
    ctx: Context, index: int, records: list[Record], host_codes: bool = True, threads: int = 1
) -> QueryBin:
    """The query bin of these records, both strands where the run needs them; `host_codes`
    makes their codes now (on the thread that prepares the bin, helped by up to `threads`)."""
    plus = pack_bin(records, ctx.options.query_prefix, threads)
    packs = {"plus": plus}
    if "minus" in ctx.strands:
        packs["minus"] = reverse_complement(plus, threads)
    qry = QueryBin(index, packs)
    if host_codes:  # the cached_property's value
        qry.__dict__["_codes"] = {s: both_codes(p.buf, threads) for s, p in packs.items()}
    return qry


@dataclass
class UnitResult:
    """One work unit's output: per (interval, strand) HSP arrays in emission order, and counts."""

    ordinal: int
    ref_bin: int
    query_bin: int
    segments: list[tuple[int, str, np.ndarray]] = field(default_factory=list)
    raw: list[tuple[str, np.ndarray]] = field(default_factory=list)
    seeds: int = 0
    hits: int = 0
    raw_hsps: int = 0
    hsps: int = 0
    engine_ms: float = 0.0  # the engine's time for the unit, on either backend
    # the CPU engine's phases: per phase, (wall, CPU) seconds of each of its threads (`--time`;
    # not in `to_bytes`)
    phases: dict = field(default_factory=dict)
    host_start_ms: float = 0.0
    host_end_ms: float = 0.0
    worker: int = 0
    device: int = -1
    job: int = 0
    # its segments files as `hspZ work` formatted them, (name, lines) in emission order, carried
    # to `hspZ merge` beside the image (`formats.results`; not in `to_bytes`)
    rendered: list[tuple[str, bytes]] | None = None

    def to_bytes(self) -> bytes:
        """A self-contained .npz image (how `hspZ work` hands results to `hspZ merge`)."""
        arrays = {"meta": _meta_array(self)}
        for i, (n, strand, h) in enumerate(self.segments):
            arrays[f"seg{i}_{n}_{strand}"] = h
        for i, (strand, h) in enumerate(self.raw):
            arrays[f"raw{i}_{strand}"] = h
        buf = io.BytesIO()
        with sigterm_held():  # a SIGTERM inside zipfile's member left it unable to close
            np.savez(buf, **arrays)  # type: ignore[arg-type]  # the stub fears a key allow_pickle
        return buf.getvalue()

    @classmethod
    def from_file(cls, path: str | Path | IO[bytes]) -> UnitResult:
        with np.load(path, allow_pickle=False) as z:
            meta = dict(zip(_META_FIELDS, z["meta"].tolist(), strict=True))
            result = cls(**{k: _meta_type(k)(v) for k, v in meta.items()})
            for key in sorted((k for k in z.files if k.startswith("seg")), key=_key_order):
                _, n, strand = key.split("_")
                result.segments.append((int(n), strand, z[key].astype(HSP_DTYPE)))
            for key in sorted((k for k in z.files if k.startswith("raw")), key=_key_order):
                result.raw.append((key.split("_")[1], z[key].astype(HSP_DTYPE)))
        return result


@dataclass
class SeedBatchOut:
    """What one seed batch (wga chunk) contributes: counts and its HSP lists in chunk order."""

    seeds: int = 0
    hits: int = 0
    raw_hsps: int = 0
    hsps: list = field(default_factory=list)
    raw: list = field(default_factory=list)


Progress = Callable[[int, int, int], None]  # (seed batches done, seed batches, seed hits so far)


@dataclass(frozen=True)
class Capabilities:
    """What a backend is, for the code that chooses devices and prepares bins."""

    on_device: bool  # units run on CUDA devices (the schedule's devices are GPUs, one a worker)
    host_codes: bool  # bins need host sequence codes (`prepare_query(host_codes=...)`)


@runtime_checkable
class Backend(Protocol):
    """One backend, as the workers, the pool and the commands use it.  `name` travels to worker
    processes (`engine.backends.by_name`) and names the backend in `hspZ benchmark`'s record."""

    name: str
    capabilities: Capabilities

    def set_threads(self, threads: int) -> None:
        """Host threads for the process's units (`--threads`; 0 = every core)."""
        ...

    def use_device(self, device: int) -> None:
        """Bind the calling thread to `device` (the CPU backend has one device: nothing)."""
        ...

    def warm_worker(self, worker: int) -> None:
        """Start what worker `worker` will need (numba, a device's context) before its job."""
        ...

    def prepare_reference(self, ctx: Context, index: int, records: list[Record]) -> RefBin:
        """The reference bin of these records, with host codes where the backend needs them."""
        ...

    def prepare_query(self, ctx: Context, index: int, records: list[Record]) -> QueryBin:
        """The query bin of these records, with host codes where the backend needs them."""
        ...

    def load_reference(self, ctx: Context, index: Index, b: int, threads: int = 0) -> RefBin:
        """Reference bin b of an index, every piece verified as it is read."""
        ...

    def run_unit(
        self,
        ctx: Context,
        ref: RefBin,
        qry: QueryBin,
        ordinal: int,
        progress: Progress | None = None,
    ) -> UnitResult:
        """One work unit: every seed batch of the query bin against the reference bin."""
        ...


class SeedBatchTally:
    """Counts a unit's finished seed batches and their hits for its `Progress` callback
    (called from any thread)."""

    def __init__(self, seed_batches: int, progress: Progress | None):
        self.seed_batches, self.progress = seed_batches, progress
        self.done = self.hits = 0
        self.lock = threading.Lock()

    def __call__(self, out: SeedBatchOut, seed_batches: int = 1) -> SeedBatchOut:
        if self.progress is not None:
            with self.lock:
                self.done += seed_batches
                self.hits += out.hits
                done, hits = self.done, self.hits
            self.progress(done, self.seed_batches, hits)
        return out


def unit_seed_batches(ctx: Context, qry: QueryBin) -> list[tuple[int, str, tuple[int, int]]]:
    """(interval number, strand, chunk) of every seed batch of a unit, in plan order."""
    o = ctx.options
    return plan.seed_batches(
        qry.block_len, ctx.shape.size, o.interval_size, o.wga_chunk_size, ctx.strands
    )


def seed_batch_groups(
    jobs: list, max_bases: int, first_bases: int | None = None
) -> list[list[int]]:
    """Job indices in runs that share one device pass: consecutive seed batches of one (interval,
    strand) whose chunks follow each other, at most `max_bases` window starts (`first_bases` in
    the first run; at least one seed batch).  Each seed batch keeps its own seeds, hits and
    semantic chunks; only the launches and host synchronisations are shared."""
    groups: list[list[int]] = []
    span = 0
    for i, (n, strand, chunk) in enumerate(jobs):
        width = chunk[1] - chunk[0]
        if groups:
            pn, pstrand, pchunk = jobs[groups[-1][-1]]
            cap = first_bases if first_bases is not None and len(groups) == 1 else max_bases
            if (pn, pstrand, pchunk[1]) == (n, strand, chunk[0]) and span + width <= cap:
                groups[-1].append(i)
                span += width
                continue
        groups.append([i])
        span = width
    return groups


def assemble(result: UnitResult, jobs: list, outs: list[SeedBatchOut]) -> UnitResult:
    """Put seed batch outputs back in plan order: one HSP array per (interval, strand)."""
    segments: dict[tuple[int, str], list] = {}
    for (n, strand, _), out in zip(jobs, outs, strict=True):
        segments.setdefault((n, strand), []).extend(out.hsps)
        result.seeds += out.seeds
        result.hits += out.hits
        result.raw_hsps += out.raw_hsps
        result.raw.extend(out.raw)
    for (n, strand), parts in segments.items():
        h = np.concatenate(parts) if parts else np.empty(0, HSP_DTYPE)
        result.hsps += len(h)
        result.segments.append((n, strand, h))
    return result


def settle(ctx: Context, raw: np.ndarray) -> tuple:
    """One semantic chunk's gated HSPs made final: (raw count, raw dump or None, deduped)."""
    n = len(raw)
    return settle_chunks(ctx, raw, np.ones(n, np.int64), np.zeros(n, np.int64), 1)[0]


def settle_chunks(
    ctx: Context, raw: np.ndarray, copies: np.ndarray, chunk: np.ndarray, n_chunks: int
) -> list[tuple]:
    """`settle` of n_chunks chunks at once, each record given with its chunk and its copies
    (the GPU backend collapses identical records, `engine.gpu._distinct`: the dump repeats
    them, and dedup keeps one either way).  Whole arrays, not a Python call per chunk: the GPU
    backend runs this on host threads while its launching thread needs the GIL."""
    counts = np.bincount(chunk, weights=copies, minlength=n_chunks).astype(np.int64)
    dumps: Sequence[np.ndarray | None] = [None] * n_chunks
    if ctx.keep_raw:
        perm = diagonal_permutation(raw, chunk)
        dump, at = np.repeat(raw[perm], copies[perm]), np.repeat(chunk[perm], copies[perm])
        dumps = _split(dump, at, n_chunks)
    final = _split(*dedup_chunks(raw, chunk), n_chunks)
    return list(zip(counts.tolist(), dumps, final, strict=True))


def _split(rows: np.ndarray, chunk: np.ndarray, n_chunks: int) -> list[np.ndarray]:
    """Rows ordered by chunk, one array per chunk."""
    ends = np.searchsorted(chunk, np.arange(n_chunks + 1), side="left")
    return [rows[a:b] for a, b in zip(ends[:-1], ends[1:], strict=True)]


def record_chunk(out: SeedBatchOut, settled: tuple, strand: str) -> None:
    """Add one settled semantic chunk to its seed batch's output, in chunk order."""
    count, raw, hsps = settled
    out.raw_hsps += count
    if raw is not None:
        out.raw.append((strand, raw))
    out.hsps.append(hsps)


def finish_chunk(ctx: Context, raw: np.ndarray, out: SeedBatchOut, strand: str) -> None:
    """Record one semantic chunk's gated HSPs: counts, optional raw dump, dedup."""
    record_chunk(out, settle(ctx, raw), strand)


_META_FIELDS = (
    "ordinal",
    "ref_bin",
    "query_bin",
    "seeds",
    "hits",
    "raw_hsps",
    "hsps",
    "engine_ms",
    "host_start_ms",
    "host_end_ms",
    "worker",
    "device",
    "job",
)
_FLOAT_FIELDS = {"engine_ms", "host_start_ms", "host_end_ms"}


def _meta_type(key: str) -> Callable[[float], Any]:
    return float if key in _FLOAT_FIELDS else int


def _meta_array(result: UnitResult) -> np.ndarray:
    return np.array([float(getattr(result, k)) for k in _META_FIELDS], dtype=np.float64)


def _key_order(key: str) -> int:
    return int(key.split("_")[0][3:])
