"""The emitter: replays unit results in planned ordinal order into segments files.

Results may arrive in any order (several workers, several processes, `hspZ merge`); each carries
its ordinal.  A duplicate ordinal, one outside the plan, or one whose bins are not the plan's is an
error, and `finish` checks that every unit arrived.  Emission order is units by ordinal and,
inside a unit, interval 1 plus, 1 minus, 2 plus, …; only non-empty files are written; a minus
list is printed reversed.  With `-D` each file is split as `partition` says, its history running
in emission order.  Files are staged in a hidden directory inside OUT and moved into place (or
archived into the `-Z` tarball) only when the whole run has succeeded, so a failed run leaves
nothing that looks complete.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import shutil
import tarfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from hspz import jit, partition
from hspz.engine import UnitResult
from hspz.errors import RunError
from hspz.jit import njit
from hspz.plan import WorkUnit
from hspz.segments import SMALL_LINES, format_lines
from hspz.sequence import PackedBin

TableLookup = Callable[[str, int, str], PackedBin]  # (side, bin, strand) -> record table


def segments_name(n: int, query_bin: int, ref_bin: int, strand: str) -> str:
    return f"tmp{n}.block{query_bin}.r{ref_bin}.{strand}.segments"


class Emitter:
    """Ordinal replay into OUT; one per job."""

    def __init__(self, units: Iterable[WorkUnit], tables: TableLookup, outdir: str | Path,
                 tarball: str | Path | None = None, diagonal: bool = False,
                 on_emit: Callable[[UnitResult], None] | None = None):
        self.units = {u.ordinal: u for u in units}
        self.tables = tables
        self.outdir = Path(outdir)
        self.tarball = Path(tarball) if tarball else None
        self.stage = self.outdir / f".hspz-partial-{os.getpid()}"
        self.created = not self.outdir.exists()  # removed again if the run fails
        self.partitioner = partition.Partitioner() if diagonal else None
        self.on_emit = on_emit
        self.pending: dict[int, tuple[UnitResult, list[str] | None]] = {}  # with staged names
        self.done: set[int] = set()
        self.order = sorted(self.units)
        self.next = 0
        self.written: list[str] = []
        self.digest = LineDigest()
        self.counts = dict(seeds=0, hits=0, raw_hsps=0, hsps=0)

    def add(self, result: UnitResult) -> None:
        """Accept one unit's result; emit every unit that is now next in order.

        Without -D a unit's files are formatted and staged as soon as it arrives, whatever its
        ordinal: their names and bytes do not depend on what came before, so a unit that waits
        for an earlier one (another worker's) is not left to format after the workers finish.
        The -D split's history runs in emission order, so with -D files are staged in order."""
        o = result.ordinal
        unit = self.units.get(o)
        if unit is None:
            raise RunError(f"work unit {o} is not in the plan ({len(self.units)} units)")
        if (unit.ref_bin, unit.query_bin) != (result.ref_bin, result.query_bin):
            raise RunError(f"work unit {o} arrived as R{result.ref_bin} Q{result.query_bin} "
                           f"but the plan has R{unit.ref_bin} Q{unit.query_bin}")
        if o in self.pending or o in self.done:
            raise RunError(f"work unit {o} arrived twice")
        self.pending[o] = (result, None if self.partitioner else self._stage(result))
        while self.next < len(self.order) and self.order[self.next] in self.pending:
            ready, names = self.pending.pop(self.order[self.next])
            self.written += self._stage(ready) if names is None else names
            self.done.add(ready.ordinal)
            self.next += 1
            if self.on_emit:
                self.on_emit(ready)

    def _stage(self, result: UnitResult) -> list[str]:
        """Write one unit's files into the stage; their names, in emission order."""
        self.stage.mkdir(parents=True, exist_ok=True)
        for key in self.counts:
            self.counts[key] += getattr(result, key)
        ref = self.tables("reference", result.ref_bin, "plus")
        names = []
        for n, strand, h in result.segments:
            if len(h) == 0:
                continue
            qry = self.tables("query", result.query_bin, strand)
            ordered = h if strand == "plus" else h[::-1]
            name = segments_name(n, result.query_bin, result.ref_bin, strand)
            for file_name, rows in self._pieces(name, ordered, ref, qry, strand):
                data = format_lines(rows, ref, qry, strand)
                (self.stage / file_name).write_bytes(data)
                names.append(file_name)
                self.digest.add(data)
        return names

    def _pieces(self, name: str, h: np.ndarray, ref: PackedBin, qry: PackedBin, strand: str):
        """(file name, HSP rows) of one logical segments file: itself, or its -D splits."""
        chunk = self.partitioner.chunk_for(len(h)) if self.partitioner else None
        if chunk is None:
            return [(name, h)]
        base = name[: -len(".segments")]
        parts = split_file(h, ref, qry, strand, chunk)
        return [(f"{base}.split{k}.segments", h[idx]) for k, idx in enumerate(parts, 1)]

    def finish(self) -> str:
        """Check completeness, publish the files (or the archive); return the digest."""
        missing = [o for o in self.order[self.next:] if o not in self.pending]
        if missing:
            raise RunError(f"{len(missing)} of {len(self.order)} work unit(s) never arrived "
                           f"(first missing: {missing[0]})")
        digest = self.digest.hexdigest()
        self.outdir.mkdir(parents=True, exist_ok=True)
        if self.tarball is not None:
            write_tarball(self.tarball, self.stage, self.written)
        else:
            for name in self.written:
                os.replace(self.stage / name, self.outdir / name)
            self.created = False  # OUT is the result, even with no files in it
        self.abort()  # the stage, and an OUT made only for staging a -Z archive elsewhere
        return digest

    def abort(self) -> None:
        """Remove the stage (and OUT when this emitter created it and it is empty)."""
        shutil.rmtree(self.stage, ignore_errors=True)
        if self.created and self.outdir.is_dir() and not any(self.outdir.iterdir()):
            self.outdir.rmdir()


def split_file(h: np.ndarray, ref: PackedBin, qry: PackedBin, strand: str,
               chunk: int) -> list[np.ndarray]:
    """KegAlign's diagonal partition of one file's HSP rows (in file order)."""
    rs = h["ref_start"].astype(np.int64)
    qs = h["query_start"].astype(np.int64)
    half = h["len"].astype(np.int64) // 2
    ri, qi = ref.record_at(rs), qry.record_at(qs)
    ref_mid = rs + 1 - ref.starts[ri] + half
    qry_mid = qs + 1 - qry.starts[qi] + half
    ref_name = partition.name_ids(ref.names)[ri]
    qry_name = partition.name_ids(qry.names)[qi]
    return partition.split(ref_name, qry_name, ref_mid, qry_mid, strand, chunk)


class LineDigest:
    """The run digest: the first 16 hex digits of sha256 over all lines sorted bytewise
    (LC_ALL=C sort).  Each added chunk's lines are sorted as they arrive, while workers still
    run; `hexdigest` merges those sorted runs and hashes.  The merge is the one step left after
    the last unit (4-6 s of 8 units' 20 M lines, BENCHMARKS.md session 5), so it runs on threads:
    splitters sampled from the runs cut every run into the same key ranges, each range's slices
    are merged (a stable sort finds the runs) and joined on a thread of its own (numpy's sort and
    the numba join release the GIL), and the ranges are hashed in order."""

    def __init__(self) -> None:
        self.runs: list[np.ndarray] = []

    def add(self, data: bytes) -> None:
        """Lines of one chunk (each ending in a newline; none contains a NUL byte)."""
        if data:
            lines = _rows_of(data)
            lines.sort()
            self.runs.append(lines)

    def hexdigest(self, threads: int = 0, ranges: int = 0) -> str:
        """`threads` (0: every core) merge `ranges` key ranges (0: by size, RANGE_LINES each)."""
        h = hashlib.sha256()
        threads = threads or os.cpu_count() or 1
        total = sum(map(len, self.runs))
        ranges = ranges or min(4 * threads, total // RANGE_LINES)
        bounds = self._bounds(max(1, ranges))
        spans = list(zip(bounds[:-1], bounds[1:], strict=True))
        with ThreadPoolExecutor(max_workers=min(threads, len(spans))) as pool:
            for text in pool.map(self._merged, spans):
                h.update(text)
        return h.hexdigest()[:16]

    def _bounds(self, ranges: int) -> list[list[int]]:
        """For each key range, then the end: where each run's slice of it starts."""
        if ranges == 1 or not self.runs:
            return [[0] * len(self.runs), [len(r) for r in self.runs]]
        sample = np.concatenate([r[np.linspace(0, len(r) - 1, min(len(r), 64 * ranges)).astype(
            np.int64)] for r in self.runs if len(r)])
        sample.sort()
        splitters = sample[np.linspace(0, len(sample), ranges + 1)[1:-1].astype(np.int64)]
        cuts = [np.searchsorted(r, splitters, side="left").tolist() for r in self.runs]
        return [[0] * len(self.runs), *map(list, zip(*cuts, strict=True)),
                [len(r) for r in self.runs]]

    def _merged(self, span: tuple[list[int], list[int]]) -> bytes:
        """The joined text of one key range of every run, sorted."""
        parts = [r[a:b] for r, a, b in zip(self.runs, *span, strict=True) if b > a]
        if not parts:
            return b""
        lines = np.concatenate(parts)
        lines.sort(kind="stable")
        return _joined(lines)


RANGE_LINES = 1 << 19  # lines per key range of the digest's final merge, at least


def _rows_of(data: bytes) -> np.ndarray:
    """The lines of `data` (split at newlines, trailing ones dropped) as one NUL-padded
    fixed-width bytes array, as wide as the longest line.  A numba loop copies large chunks
    into the rows: a Python bytes object per line, then the array, held the GIL for 0.2-0.35 s
    of each 1.1 M-line unit (BENCHMARKS.md, session 7).  Small chunks, while numba is not
    loaded, are split in Python."""
    end = len(data)
    while end and data[end - 1] == 10:  # as rstrip: trailing newlines end the last line
        end -= 1
    buf = np.frombuffer(data, np.uint8, count=end)
    ends = np.append(np.flatnonzero(buf == 10), end)
    if jit.numpy_first(len(ends), SMALL_LINES):
        return np.array(data.rstrip(b"\n").split(b"\n"), dtype=bytes)
    width = max(1, int(np.diff(ends, prepend=-1).max()) - 1)
    rows = np.zeros((len(ends), width), np.uint8)
    _fill_rows(buf, ends, rows)
    return rows.view(f"S{width}").ravel()


@njit
def _fill_rows(buf, ends, rows):
    start = 0
    for i in range(len(ends)):
        rows[i, : ends[i] - start] = buf[start : ends[i]]
        start = ends[i] + 1


def _joined(lines: np.ndarray) -> bytes:
    """NUL-padded fixed-width lines as text: each line without its padding, then a newline."""
    width = lines.dtype.itemsize
    cells = lines.view(np.uint8).reshape(len(lines), width)
    if not jit.numpy_first(len(lines), SMALL_LINES):
        return _join_rows(cells).tobytes()
    # numpy, while numba is not loaded (`hspz.jit`): each row, a newline at its end, then the
    # cells up to and including it
    ends = np.where(cells.any(axis=1), width - np.argmax(cells[:, ::-1] != 0, axis=1), 0)
    rows = np.zeros((len(lines), width + 1), np.uint8)
    rows[:, :width] = cells
    rows[np.arange(len(lines)), ends] = 10
    return rows[np.arange(width + 1) <= ends[:, None]].tobytes()


@njit
def _join_rows(cells):
    n, width = cells.shape
    out = np.empty(n * (width + 1), np.uint8)
    at = 0
    for i in range(n):
        end = width
        while end > 0 and cells[i, end - 1] == 0:
            end -= 1
        out[at:at + end] = cells[i, :end]
        out[at + end] = 10
        at += end + 1
    return out[:at]


def digest_of(chunks: list[bytes]) -> str:
    """`LineDigest` of these chunks."""
    d = LineDigest()
    for chunk in chunks:
        d.add(chunk)
    return d.hexdigest()


def write_tarball(path: Path, stage: Path, names: list[str]) -> None:
    """A byte-reproducible .tar.gz: entries in emission order, mode 0644, mtime 0, bare names."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
    with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            for name in names:
                data = (stage / name).read_bytes()
                info = tarfile.TarInfo(name)
                info.size, info.mode, info.mtime = len(data), 0o644, 0
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                tar.addfile(info, io.BytesIO(data))
    os.replace(tmp, path)
