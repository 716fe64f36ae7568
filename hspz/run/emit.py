"""The emitter: replays unit results in planned ordinal order into segments files.

Results may arrive in any order (several workers, several processes, `hspZ merge`); each carries
its ordinal.  A duplicate ordinal, one outside the plan, or one whose bins are not the plan's is an
error, and `finish` checks that every unit arrived.  Emission order is units by ordinal and,
inside a unit, interval 1 plus, 1 minus, 2 plus, …; only non-empty files are written; a minus
list is printed reversed.  With `-D` each file is split as `partition` says, its history running
in emission order.

Publishing, and what a killed run leaves.  Every file of the run (its segments files, or the
`-Z` archive, and the `--dump-raw` file) is written and fsynced under a hidden stage folder in
OUT named by a uuid4 (unique across hosts and PID namespaces; a file destined outside OUT is
staged beside its destination), while the workers still run.  Only when every unit has arrived
does `finish` hand the complete set to `outdir.publish`: a journal naming every move and every
stale file is written atomically, the files are renamed into place, the stale ones removed, and
the journal removed.  Stale files are the segments files named as hspZ names them that this run
did not write (an earlier layout's, say), so OUT then holds exactly this run's output and
`cat *.segments | LC_ALL=C sort | sha256sum` gives the printed digest; other files are kept.

The invariant: at every instant, OUT holds the complete earlier result, plus at most a stage
folder (before the journal exists), or a journal whose steps, repeated by the next command that
takes OUT's lock (`outdir.OutLock`), give the complete new result.  So after a SIGKILL at any
instant and that command's roll-forward, OUT holds one complete result, never a mixture; a run
that fails or is stopped before its journal exists leaves the earlier result untouched.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from hspz.core import durable, faults, jit
from hspz.core.errors import RunError, sigterm_held
from hspz.core.jit import njit
from hspz.engine.contract import UnitResult
from hspz.io.packing import PackedBin
from hspz.planning.memory import WorkUnit
from hspz.run.outdir import OUR_NAMES, complete, journal_of, new_stage, publish, segments_name
from hspz.stages import partition
from hspz.stages.segments import SMALL_LINES, format_lines

TableLookup = Callable[[str, int, str], PackedBin]  # (side, bin, strand) -> record table


class Emitter:
    """Ordinal replay into OUT; one per job."""

    def __init__(self, units: Iterable[WorkUnit], tables: TableLookup, outdir: str | Path,
                 tarball: str | Path | None = None, diagonal: bool = False,
                 on_emit: Callable[[UnitResult], None] | None = None):
        self.units = {u.ordinal: u for u in units}
        self.tables = tables
        self.outdir = Path(outdir)
        self.root = Path(os.path.abspath(outdir))
        self.tarball = Path(tarball) if tarball else None
        self.stage = new_stage(self.root)
        self.created = not self.outdir.exists()  # removed again if the run fails
        self.partitioner = partition.Partitioner() if diagonal else None
        self.on_emit = on_emit
        self.pending: dict[int, tuple[UnitResult, list[str] | None]] = {}  # with staged names
        self.done: set[int] = set()
        self.order = sorted(self.units)
        self.next = 0
        self.written: list[str] = []
        # one digest group per reference bin, sealed once its units are staged (`LineDigest`)
        self.left = Counter(u.ref_bin for u in self.units.values())
        self.digest = LineDigest({b: [n.encode() for n in tables("reference", b, "plus").names]
                                  for b in sorted(self.left)})
        self.counts = dict(seeds=0, hits=0, raw_hsps=0, hsps=0)
        self.removed: list[str] = []  # an earlier run's segments files, removed by `finish`
        self.extras: list[tuple[Path, Callable[[Path], None], str]] = []  # `also`
        self.outside: list[Path] = []  # files staged beside a destination outside OUT

    def also(self, path: str | Path, write: Callable[[Path], None], flag: str) -> None:
        """Publish one more file with the segments files: `write(tmp)` writes it (at `finish`,
        to a staged name) and it is moved onto `path` in the same publish."""
        self.extras.append((Path(path), write, flag))

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
        faults.point("unit")

    def _stage(self, result: UnitResult) -> list[str]:
        """Write one unit's files into the stage, synced; their names, in emission order."""
        for key in self.counts:
            self.counts[key] += getattr(result, key)
        ref = self.tables("reference", result.ref_bin, "plus")
        files = []  # (name, rows, query table, strand), in emission order
        for n, strand, h in result.segments:
            if len(h) == 0:
                continue
            qry = self.tables("query", result.query_bin, strand)
            ordered = h if strand == "plus" else h[::-1]
            name = segments_name(n, result.query_bin, result.ref_bin, strand)
            files += [(file_name, rows, qry, strand)
                      for file_name, rows in self._pieces(name, ordered, ref, qry, strand)]

        def render(file: tuple) -> np.ndarray:
            file_name, rows, qry, strand = file
            data = format_lines(rows, ref, qry, strand)
            durable.write_new(self.stage / file_name, data)
            return sorted_lines(data)

        with _writing(self.outdir):
            if files and not self.stage.exists():
                durable.ensure_marked(self.stage)
            with ThreadPoolExecutor(max(1, min(STAGE_THREADS, len(files)))) as pool:
                for lines in pool.map(render, files):
                    self.digest.add_sorted(lines, result.ref_bin)
        self.left[result.ref_bin] -= 1
        if not self.left[result.ref_bin]:
            self.digest.seal(result.ref_bin)
        return [f[0] for f in files]

    def _pieces(self, name: str, h: np.ndarray, ref: PackedBin, qry: PackedBin, strand: str):
        """(file name, HSP rows) of one logical segments file: itself, or its -D splits."""
        chunk = self.partitioner.chunk_for(len(h)) if self.partitioner else None
        if chunk is None:
            return [(name, h)]
        base = name[: -len(".segments")]
        parts = split_file(h, ref, qry, strand, chunk)
        return [(f"{base}.split{k}.segments", h[idx]) for k, idx in enumerate(parts, 1)]

    def finish(self) -> str:
        """Check completeness, publish the files (or the archive) and the extra files in one
        step (see the module docstring); return the digest."""
        missing = [o for o in self.order[self.next:] if o not in self.pending]
        if missing:
            raise RunError(f"{len(missing)} of {len(self.order)} work unit(s) never arrived "
                           f"(first missing: {missing[0]})")
        digest = self.digest.hexdigest()
        with _writing(self.outdir):
            if not self.stage.exists():
                durable.ensure_marked(self.stage)
            moves = [self._extra(path, write, flag) for path, write, flag in self.extras]
            if self.tarball is not None:
                moves.append(self._archive())
                stale = []
            else:
                moves += [(self.stage / n, self.outdir / n) for n in self.written]
                stale = self._stale()
            faults.point("staged")
            with sigterm_held():  # all of the renames, or none
                publish(self.root, self.stage, moves, [self.outdir / n for n in stale], digest)
        self.removed = stale
        if self.tarball is None:
            self.created = False  # OUT is the result, even with no files in it
        self.abort()  # an OUT made only for staging a -Z archive elsewhere
        return digest

    def _staged_for(self, path: Path) -> Path:
        """Where a file destined for `path` is written first: in the stage when `path` lies in
        OUT itself (a rename within one folder tree), else beside `path` (one mount)."""
        path = Path(os.path.abspath(path))
        if path.parent == self.root:
            return self.stage / f".{path.name}"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.partial-{uuid.uuid4().hex}")
        self.outside.append(tmp)
        return tmp

    def _extra(self, path: Path, write: Callable[[Path], None], flag: str) -> tuple[Path, Path]:
        durable.guard(flag, path)
        tmp = self._staged_for(path)
        try:
            write(tmp)
        except OSError as exc:
            raise RunError(f"{flag}: cannot write {path}: {exc.strerror or exc}") from exc
        return tmp, path

    def _archive(self) -> tuple[Path, Path]:
        durable.guard("--tarball", self.tarball)
        tmp = self._staged_for(self.tarball)
        write_tarball(tmp, self.stage, self.written)
        return tmp, self.tarball

    def _stale(self) -> list[str]:
        """The segments files named as hspZ names them that this run did not write."""
        ours = set(self.written)
        return sorted(e.name for e in os.scandir(self.outdir) if e.name not in ours
                      and OUR_NAMES.fullmatch(e.name) and e.is_file(follow_symlinks=False))

    def abort(self) -> None:
        """Remove the stage and the files staged outside OUT (and OUT when this emitter created
        it and it is empty).  A publish stopped after its journal was written (an error, or
        Ctrl-C, between two renames) is completed instead: the journal promised it."""
        try:
            journal = journal_of(self.root)
            if journal is not None and journal["stage"] == self.stage.name:
                complete(self.root)
        except (OSError, RunError):
            return  # the journal, its stage and files stay for the next command to complete
        durable.remove_marked(self.stage)
        for tmp in self.outside:
            tmp.unlink(missing_ok=True)
        if self.created and self.outdir.is_dir() and not any(self.outdir.iterdir()):
            self.outdir.rmdir()


@contextmanager
def _writing(outdir: Path) -> Iterator[None]:
    """An OSError (a full disk, say) as one RunError line naming OUT."""
    try:
        yield
    except OSError as exc:
        name = f" ({Path(exc.filename).name})" if exc.filename else ""
        raise RunError(f"cannot write the output in {outdir}: {exc.strerror or exc}{name}") \
            from exc


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
    run, then merged and hashed in key order.

    With `groups` (group -> the first fields its lines start with: a reference bin's names), a
    group's lines all lie in one key span, [min(name + TAB), max(name + LF)).  Once a group is
    sealed (it will add no more lines), every key range outside the spans of unsealed groups is
    final: its lines are merged and joined then (`_settle`), and hashed as soon as everything
    before them is.  Units finishing in plan order thus leave the last reference bin's lines,
    not all lines, for after the last unit.  Joined text waits in memory until everything
    before it is hashed: with several workers, up to the later workers' share of the output.
    Without groups everything is merged at the end.

    A merge runs on threads: splitters sampled from the runs cut every run into the same key
    ranges, each range's slices are merged (a stable sort finds the runs) and joined on a thread
    of its own (numpy's sort and the numba join release the GIL), and the ranges are hashed in
    order (BENCHMARKS.md, sessions 5 and 6)."""

    def __init__(self, groups: dict[int, list[bytes]] | None = None, threads: int = 0,
                 ranges: int = 0):
        """`threads` (0: every core) merge in `ranges` key ranges (0: by size, RANGE_LINES
        lines each, at most four a thread)."""
        self.threads, self.ranges = threads or os.cpu_count() or 1, ranges
        self.runs: list[np.ndarray] = []  # sorted lines of sealed groups, not yet merged
        self.pending: dict[int, list[np.ndarray]] = {g: [] for g in groups or {}}
        self.spans = {g: (min(n + b"\t" for n in names), max(n + b"\n" for n in names))
                      for g, names in (groups or {}).items() if names}
        self.pieces: list[tuple[bytes, bytes | None, list[bytes]]] = []  # (lo, hi, texts)
        self.frontier: bytes | None = b""  # every line below it is hashed (None: every line)
        self.hash = hashlib.sha256()

    def add(self, data: bytes, group: int | None = None) -> None:
        """Lines of one chunk (each ending in a newline; none contains a NUL byte), of `group`
        when the digest has groups."""
        if data:
            self.add_sorted(sorted_lines(data), group)

    def add_sorted(self, lines: np.ndarray, group: int | None = None) -> None:
        """`add` of lines already made a sorted run (`sorted_lines`)."""
        if not len(lines):
            return
        if not self.pending and group is None:
            self.runs.append(lines)
            return
        lo, hi = self.spans.get(group, (b"", b""))
        if group not in self.pending or _search(lines, lo) or _search(lines, hi) < len(lines):
            raise RuntimeError(f"digest: lines outside group {group}'s names or after its seal")
        self.pending[group].append(lines)

    def seal(self, group: int) -> None:
        """`group` adds no more lines: merge and hash what has become final."""
        self.runs += self.pending.pop(group)
        self.spans.pop(group, None)
        self._settle()

    def hexdigest(self) -> str:
        """Seal what is still open, merge and hash the rest; the digest."""
        for group in list(self.pending):
            self.seal(group)
        self._settle()
        return self.hash.hexdigest()[:16]

    def _settle(self) -> None:
        """Merge and join the lines of every key range no unsealed group can add to (beyond the
        frontier, outside the pieces already joined); hash the pieces that start at the
        frontier."""
        if self.frontier is None:
            return
        taken = sorted([*self.spans.values(), *((lo, hi) for lo, hi, _ in self.pieces)])
        # while units still run, a few threads: the workers' host threads need the cores
        threads = min(self.threads, RUNNING_THREADS) if self.pending else self.threads
        for lo, hi in _gaps(self.frontier, taken):
            cut = [(_search(r, lo), len(r) if hi is None else _search(r, hi)) for r in self.runs]
            inside = [r[a:b] for r, (a, b) in zip(self.runs, cut, strict=True) if b > a]
            self.pieces.append((lo, hi, _merge_join(inside, threads, self.ranges)))
            self.runs = [x for r, (a, b) in zip(self.runs, cut, strict=True)
                         for x in (r[:a], r[b:]) if len(x)]
        self.pieces.sort(key=lambda p: p[0])
        while self.pieces and self.pieces[0][0] == self.frontier:
            _, self.frontier, texts = self.pieces.pop(0)
            for text in texts:
                self.hash.update(text)
            if self.frontier is None:
                return


def _gaps(start: bytes, taken: list[tuple[bytes, bytes | None]]):
    """The key ranges [lo, hi) from `start` on that no interval of `taken` (sorted by lo; hi
    None: no end) overlaps; hi None: no end."""
    at = start
    for lo, hi in taken:
        if at is None:
            return
        if lo > at:
            yield at, lo
        if hi is None or hi > at:
            at = hi
    if at is not None:
        yield at, None


def _search(run: np.ndarray, key: bytes) -> int:
    """np.searchsorted(run, key, "left") for a sorted fixed-width bytes array, without the copy
    numpy makes of `run` for a key wider than it: a line no wider than run's width is below a
    longer key exactly when it is at most the key's first `width` bytes."""
    width = run.dtype.itemsize
    if len(key) <= width:
        return int(np.searchsorted(run, key, side="left"))
    return int(np.searchsorted(run, key[:width], side="right"))


def _merge_join(runs: list[np.ndarray], threads: int, ranges: int = 0) -> list[bytes]:
    """The lines of sorted runs, merged, as joined texts in key order (one per key range, the
    ranges merged on `threads` threads)."""
    total = sum(map(len, runs))
    if not total:
        return []
    ranges = max(1, ranges or min(4 * threads, total // RANGE_LINES))
    bounds = _bounds(runs, ranges)
    spans = list(zip(bounds[:-1], bounds[1:], strict=True))
    if len(spans) == 1:
        return [_merged(runs, spans[0])]
    with ThreadPoolExecutor(max_workers=min(threads, len(spans))) as pool:
        return list(pool.map(lambda span: _merged(runs, span), spans))


def _bounds(runs: list[np.ndarray], ranges: int) -> list[list[int]]:
    """For each key range, then the end: where each run's slice of it starts."""
    if ranges == 1:
        return [[0] * len(runs), [len(r) for r in runs]]
    sample = np.concatenate([r[np.linspace(0, len(r) - 1, min(len(r), 64 * ranges)).astype(
        np.int64)] for r in runs if len(r)])
    sample.sort()
    splitters = sample[np.linspace(0, len(sample), ranges + 1)[1:-1].astype(np.int64)]
    cuts = [np.searchsorted(r, splitters, side="left").tolist() for r in runs]
    return [[0] * len(runs), *map(list, zip(*cuts, strict=True)), [len(r) for r in runs]]


def _merged(runs: list[np.ndarray], span: tuple[list[int], list[int]]) -> bytes:
    """The joined text of one key range of every run, sorted."""
    parts = [r[a:b] for r, a, b in zip(runs, *span, strict=True) if b > a]
    if not parts:
        return b""
    lines = np.concatenate(parts)
    lines.sort(kind="stable")
    return _joined(lines)


RANGE_LINES = 1 << 19  # lines per key range of the digest's final merge, at least
RUNNING_THREADS = 4  # threads of a digest merge while groups are still open
STAGE_THREADS = 4  # a unit's files formatted and made digest runs at once (numba's loops and
# numpy's sort release the GIL)


def sorted_lines(data: bytes) -> np.ndarray:
    """The lines of `data` as a sorted fixed-width run, as the digest holds them (`_rows_of`;
    numpy's sort releases the GIL, so files are made runs on threads)."""
    if not data:
        return np.empty(0, "S1")
    lines = _rows_of(data)
    lines.sort()
    return lines


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
    # numpy, while numba is not loaded (`hspz.core.jit`): each row, a newline at its end, then the
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
    """A byte-reproducible .tar.gz at `path` (synced; the caller renames it into place):
    entries in emission order, mode 0644, mtime 0, bare names."""
    with (durable.new_file(path) as raw,
          gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz):
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            for name in names:
                data = (stage / name).read_bytes()
                info = tarfile.TarInfo(name)
                info.size, info.mode, info.mtime = len(data), 0o644, 0
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                tar.addfile(info, io.BytesIO(data))
