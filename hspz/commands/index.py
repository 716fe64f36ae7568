"""`hspZ index`: read the reference, bin it as `run` bins it, build every bin's seed table and
score codes (on the device when the backend is the GPU), write them with their checksums into a
sibling `.tmp` folder and rename it onto the index path.

    read (records + the file's sha256 and piece hashes) -> check names and bins -> build bins
    -> write, fsync -> MANIFEST -> READY -> rename
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from hspz.core.errors import UsageError
from hspz.core.options import Options
from hspz.engine.contract import Backend
from hspz.formats import index as ix
from hspz.io.digests import records_digest
from hspz.io.packing import pack_bin
from hspz.io.readers import read_bytes, side_of
from hspz.io.records import Record
from hspz.planning import bins as planning
from hspz.planning.budget import host_memory_bytes
from hspz.run.execute import timed
from hspz.run.report import say
from hspz.stages.seed import SeedShape


def index_command(
    options: Options, reference: str, dest: str, select: Callable[[], Backend], show_time: bool
) -> int:
    """Build the index of `reference` at `dest` (which must not exist)."""
    t0 = time.perf_counter()
    path = Path(dest)
    if path.exists() or path.is_symlink():
        raise UsageError(
            f"--index: {path} already exists; an index is never overwritten "
            f"(remove it or name another folder)"
        )
    phases: dict[str, float] = {}
    with ix.building(path) as tmp:
        with timed(phases, "input"):
            size, sha, pieces, records = read_reference(reference, options.threads)
        # record names are never empty nor hold whitespace: the readers refuse them (names.py)
        lengths = [len(r) for r in records]
        bins = planning.make_bins(lengths, options.seq_block_size, options.kegalign_bins)
        ix.check_bin_sizes(bins, lengths)
        engine = select()
        with timed(phases, "build + write"):
            arrays = build_bins(options, records, bins, engine, tmp)
        m = ix.IndexManifest(
            options.pattern,
            options.step,
            options.seq_block_size,
            options.kegalign_bins,
            [r.name for r in records],
            lengths,
            records_digest(records),
            size,
            sha,
            bins,
            arrays,
            source_pieces=pieces,
        )
        ix.write_text_synced(tmp / ix.MANIFEST, m.to_text())
        ix.write_text_synced(tmp / ix.READY, "")
    on_disk = sum(e.length * ix.ARRAYS[name].itemsize for (_, name), e in arrays.items())
    wall = time.perf_counter() - t0
    say(
        f"index: built {path}: {len(bins)} bin(s) of {len(records)} record(s), "
        f"{sum(lengths)} bp, {on_disk / 2**30:.2f} GiB; seed {options.seed}, step "
        f"{options.step}, -B {options.seq_block_size}"
        f"{', --kegalign-bins' if options.kegalign_bins else ''}; {wall:.1f} s"
    )
    if show_time:
        for name, seconds in phases.items():
            print(f"time: {name:<28} {seconds:>9.3f}", file=sys.stderr)
        print(f"time: {'wall':<28} {wall:>9.3f}", file=sys.stderr)
    return 0


def read_reference(reference: str, threads: int) -> tuple[int, str, tuple[str, ...], list[Record]]:
    """(size, sha256, piece hashes, records) of the reference, all of the same bytes, read once:
    a file appended to or cut while it is read cannot give records its recorded hashes do not
    describe (three readers of the file did: a record appended between the hashing and the
    decoding was indexed under the hashes of the file without it), and a pipe is read once.
    The bytes are hashed on threads while the records are decoded."""
    data = read_bytes(reference)
    with ThreadPoolExecutor(2) as pool:
        whole = pool.submit(lambda: hashlib.sha256(data).hexdigest())
        pieces = pool.submit(ix.piece_digests, data, threads, ix.SOURCE_PIECE)
        records = side_of(data, reference, "reference")
        return len(data), whole.result(), tuple(pieces.result()), records


def build_bins(
    options: Options, records: list[Record], bins: planning.Bins, engine: Backend, tmp: Path
) -> dict[tuple[int, str], ix.ArrayEntry]:
    """Every bin's arrays, built a few at a time and written (with their piece checksums) on a
    thread of their own as they come: their manifest entries."""
    shape = SeedShape.from_pattern(options.pattern)
    threads = options.threads or os.cpu_count() or 1
    members = [[records[k] for k in b] for b in bins]
    if engine.capabilities.on_device:
        from hspz.engine import gpu

        def make(b: int) -> ix.BuiltBin:
            packed = pack_bin(members[b])
            return ix.BuiltBin(b, *gpu.index_arrays(shape, options.step, packed.buf))

        builders = 2  # the next bin is packed on the host while the device builds one
    else:

        def make(b: int) -> ix.BuiltBin:
            return ix.build_bin_host(b, members[b], shape, options.step)

        builders = _host_builders(threads, max(sum(len(r) for r in m) for m in members))
    entries: dict[tuple[int, str], ix.ArrayEntry] = {}
    with ThreadPoolExecutor(1) as writer:
        written: list[Future] = []
        for built in bounded_map(make, range(len(bins)), builders):
            written.append(writer.submit(ix.write_bin, tmp, built, threads))
            del built
            if len(written) >= 2:  # at most one built bin waits for the writer
                written[-2].result()
        for b, future in enumerate(written):
            entries.update({(b, name): e for name, e in future.result().items()})
    return entries


def _host_builders(threads: int, largest_bp: int) -> int:
    """Bins built at once on the CPU: the threads, as far as host memory holds about 8 bytes a
    base for each bin being built (bases, both codes, positions)."""
    memory = host_memory_bytes()
    fit = threads if memory is None else max(1, memory // 2 // max(8 * largest_bp, 1))
    return max(1, min(threads, fit))


def bounded_map(fn: Callable, items: Iterable, workers: int) -> Generator:
    """fn(item) for each item, in order, at most `workers` computed at once (and held)."""
    items = list(items)
    with ThreadPoolExecutor(max(1, workers)) as pool:
        pending: list[Future | None] = [pool.submit(fn, x) for x in items[:workers]]
        for i in range(len(items)):
            result = pending[i].result()  # type: ignore[union-attr]  # None only once taken
            pending[i] = None
            if i + workers < len(items):
                pending.append(pool.submit(fn, items[i + workers]))
            yield result
