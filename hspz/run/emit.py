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

`hspZ merge` of a query list publishes all its jobs at once (`execute.Emitters` with a batch
root): every job stages into one stage folder in OUT under names of its own (`prefix`), its
`ready` gives the moves and stale files `publish` would take, and one journal in OUT moves them
all, so each folder is synced once, not once a job.

The invariant: at every instant, OUT holds the complete earlier result, plus at most a stage
folder (before the journal exists), or a journal whose steps, repeated by the next command that
takes OUT's lock (`outdir.OutLock`), give the complete new result.  So after a SIGKILL at any
instant and that command's roll-forward, OUT holds one complete result, never a mixture; a run
that fails or is stopped before its journal exists leaves the earlier result untouched.
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hspz.core import durable, faults
from hspz.core.errors import InputError, RunError, sigterm_held
from hspz.engine.contract import UnitResult
from hspz.formats.manifest import Manifest
from hspz.io.packing import PackedBin, table_from
from hspz.planning.bins import WorkUnit
from hspz.run.digest import LineDigest, OutsideGroup, sorted_lines
from hspz.run.outdir import OUR_NAMES, discard_stage, new_stage, publish, segments_name
from hspz.stages import partition
from hspz.stages.segments import format_lines

TableLookup = Callable[[str, int, str], PackedBin]  # (side, bin, strand) -> record table


@dataclass(frozen=True)
class Ready:
    """A job staged whole: the (staged, destination) moves and the stale files of its publish,
    and its digest."""

    moves: list[tuple[Path, Path]]
    stale: list[str]
    remove: list[Path]
    digest: str


class Emitter:
    """Ordinal replay into OUT; one per job."""

    def __init__(
        self,
        units: Iterable[WorkUnit],
        tables: TableLookup,
        outdir: str | Path,
        tarball: str | Path | None = None,
        diagonal: bool = False,
        on_emit: Callable[[UnitResult], None] | None = None,
        stage: Path | None = None,
        prefix: str = "",
    ):
        """`stage`: a stage folder the caller made and removes, shared with other emitters
        (each stages under its `prefix`); None: one of its own, in OUT."""
        self.units = {u.ordinal: u for u in units}
        self.tables = tables
        self.outdir = Path(outdir)
        self.root = Path(os.path.abspath(outdir))
        self.tarball = Path(tarball) if tarball else None
        self.borrowed = stage is not None  # the stage is its maker's (`Emitters`)
        self.stage = stage if stage is not None else new_stage(self.root)
        self.prefix = prefix
        self.created = not self.outdir.exists()  # removed again if the run fails
        self.partitioner = partition.Partitioner() if diagonal else None
        self.on_emit = on_emit
        self.pending: dict[int, tuple[UnitResult, list[str] | None]] = {}  # with staged names
        self.done: set[int] = set()
        self.order = sorted(self.units)
        self.next = 0
        self.written: list[str] = []
        self.digest = UnitDigest(self.units.values(), tables)
        # the digest `hspZ work` made of this job's lines, when it ran all of its units: then
        # the lines are neither sorted nor hashed again (`Emitters`' `known`)
        self.known: str | None = None
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
            raise RunError(
                f"work unit {o} arrived as R{result.ref_bin} Q{result.query_bin} "
                f"but the plan has R{unit.ref_bin} Q{unit.query_bin}"
            )
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
        """Write one unit's files into the stage, synced; their names, in emission order.  The
        lines `hspZ work` formatted come with the result (`rendered`): they are written as they
        are, where the same files are asked for (no -D split)."""
        for key in self.counts:
            self.counts[key] += getattr(result, key)
        files = unit_files(result, self.tables, self.partitioner)
        texts = rendered_texts(result, files) if self.partitioner is None else None

        def render(k: int) -> np.ndarray | None:  # the file's sorted lines, for the digest
            file_name, rows, ref, qry, strand = files[k]
            data = texts[k] if texts is not None else format_lines(rows, ref, qry, strand)
            durable.write_new(self.staged(file_name), data)
            return sorted_lines(data) if self.known is None else None

        with _writing(self.outdir):
            if files and not self.stage.exists():
                durable.ensure_marked(self.stage)
            with ThreadPoolExecutor(max(1, min(STAGE_THREADS, len(files)))) as pool:
                runs = [r for r in pool.map(render, range(len(files))) if r is not None]
        if self.known is None:
            try:
                self.digest.add(result.ref_bin, runs)
            except OutsideGroup:  # lines `hspZ work` never formats: forged
                raise _damaged(result) from None
        return [f[0] for f in files]

    def staged(self, name: str) -> Path:
        """Where the file `name` of this emitter is staged."""
        return self.stage / f"{self.prefix}{name}"

    def finish(self) -> str:
        """Check completeness, publish the files (or the archive) and the extra files in one
        step (see the module docstring); return the digest."""
        ready = self.ready()
        with _writing(self.outdir), sigterm_held():  # all of the renames, or none
            publish(self.root, self.stage, ready.moves, ready.remove, ready.digest)
        return self.published(ready)

    def ready(self) -> Ready:
        """Check completeness and stage the archive and the extra files: what `publish` then
        moves and removes.  A shared stage's job folder is made here, as its own stage made it."""
        missing = [o for o in self.order[self.next :] if o not in self.pending]
        if missing:
            raise RunError(
                f"{len(missing)} of {len(self.order)} work unit(s) never arrived "
                f"(first missing: {missing[0]})"
            )
        with _writing(self.outdir):
            if self.borrowed:
                self.outdir.mkdir(parents=True, exist_ok=True)
            elif not self.stage.exists():
                durable.ensure_marked(self.stage)
            moves = [self._extra(path, write, flag) for path, write, flag in self.extras]
            if self.tarball is not None:
                moves.append(self._archive())
                stale = []
            else:
                moves += [(self.staged(n), self.outdir / n) for n in self.written]
                stale = self._stale()
            faults.point("staged")
        digest = self.known if self.known is not None else self.digest.hexdigest()
        return Ready(moves, stale, [self.outdir / n for n in stale], digest)

    def published(self, ready: Ready) -> str:
        """After the publish of `ready`: what it removed kept, the stage gone; the digest."""
        self.removed = ready.stale
        if self.tarball is None:
            self.created = False  # OUT is the result, even with no files in it
        self.abort()  # an OUT made only for staging a -Z archive elsewhere
        return ready.digest

    def _staged_for(self, path: Path) -> Path:
        """Where a file destined for `path` is written first: in the stage when `path` lies in
        OUT itself (a rename within one folder tree), else beside `path` (one mount)."""
        path = Path(os.path.abspath(path))
        if path.parent == self.root:
            return self.staged(f".{path.name}")
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
        tarball = self.tarball
        assert tarball is not None  # called only with --tarball
        durable.guard("--tarball", tarball)
        tmp = self._staged_for(tarball)
        write_tarball(tmp, [(n, self.staged(n)) for n in self.written])
        return tmp, tarball

    def _stale(self) -> list[str]:
        """The segments files named as hspZ names them that this run did not write."""
        ours = set(self.written)
        return sorted(
            e.name
            for e in os.scandir(self.outdir)
            if e.name not in ours
            and OUR_NAMES.fullmatch(e.name)
            and e.is_file(follow_symlinks=False)
        )

    def abort(self) -> None:
        """Remove the stage and the files staged outside OUT (and OUT when this emitter created
        it and it is empty).  A publish stopped after its journal was written (an error, or
        Ctrl-C, between two renames) is completed instead: the journal promised it.  A shared
        stage, and a journal naming it, are its maker's to remove or complete."""
        if self.borrowed or discard_stage(self.root, self.stage):
            self._remove_own()

    def _remove_own(self) -> None:
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
        raise RunError(f"cannot write the output in {outdir}: {exc.strerror or exc}{name}") from exc


UnitFile = tuple[str, np.ndarray, PackedBin, PackedBin, str]  # name, rows, ref, query, strand


def unit_files(
    result: UnitResult, tables: TableLookup, partitioner: partition.Partitioner | None = None
) -> list[UnitFile]:
    """A unit's segments files in emission order (its -D splits, given a partitioner, whose
    history they then advance): (name, HSP rows in file order, the record tables, strand)."""
    ref = tables("reference", result.ref_bin, "plus")
    files = []
    for n, strand, h in result.segments:
        if len(h) == 0:
            continue
        qry = tables("query", result.query_bin, strand)
        rows = h if strand == "plus" else h[::-1]
        name = segments_name(n, result.query_bin, result.ref_bin, strand)
        chunk = partitioner.chunk_for(len(rows)) if partitioner else None
        if chunk is None:
            files.append((name, rows, ref, qry, strand))
            continue
        base = name[: -len(".segments")]
        for k, idx in enumerate(split_file(rows, ref, qry, strand, chunk), 1):
            files.append((f"{base}.split{k}.segments", rows[idx], ref, qry, strand))
    return files


def render_unit(result: UnitResult, tables: TableLookup) -> list[tuple[str, bytes]]:
    """A unit's segments files (no -D split) as an emitter writes them: (name, lines)."""
    return [(f[0], format_lines(*f[1:])) for f in unit_files(result, tables)]


def rendered_texts(result: UnitResult, files: list[UnitFile]) -> list[bytes] | None:
    """The lines `hspZ work` formatted for these files (`result.rendered`), checked to be one
    line per HSP of each file under the same names; None when the result came without them."""
    if result.rendered is None:
        return None
    names = [name for name, _ in result.rendered]
    fits = names == [f[0] for f in files] and all(
        data.count(b"\n") == len(f[1]) and data.endswith(b"\n") and b"\0" not in data
        for (_, data), f in zip(result.rendered, files, strict=True)
    )  # one whole line a HSP (no unended last line), and no NUL: the digest's lines hold none
    if not fits:
        raise _damaged(result)
    return [data for _, data in result.rendered]


def _damaged(result: UnitResult) -> InputError:
    return InputError(
        f"work unit {result.ordinal} of job {result.job + 1}: its formatted lines do not "
        f"match its HSPs (a damaged results file: rerun `hspZ work`)"
    )


def jobs_held_whole(units: Iterable[tuple[int, int]], unit_counts: Sequence[int]) -> set[int]:
    """The jobs (indices of `unit_counts`, each job's number of units) all of whose units are
    among `units` (job, ordinal): those whose digest one worker can make."""
    held = Counter(j for j, _ in units)
    return {j for j, n in enumerate(unit_counts) if held[j] == n}


class UnitDigest:
    """A job's digest fed a unit at a time: one `LineDigest` group per reference bin, sealed
    once the bin's last unit is in (merging on `threads`, 0: every core)."""

    def __init__(self, units: Iterable[WorkUnit], tables: TableLookup, threads: int = 0):
        self.left = Counter(u.ref_bin for u in units)
        names = {b: [n.encode() for n in tables("reference", b, "plus").names] for b in self.left}
        self.lines = LineDigest({b: names[b] for b in sorted(names)}, threads)

    def add(self, ref_bin: int, runs: Iterable[np.ndarray]) -> None:
        """One unit's files' sorted lines (`sorted_lines`); OutsideGroup for lines outside
        the bin's record names."""
        for run in runs:
            self.lines.add_sorted(run, ref_bin)
        self.left[ref_bin] -= 1
        if not self.left[ref_bin]:
            self.lines.seal(ref_bin)

    def hexdigest(self) -> str:
        return self.lines.hexdigest()


def split_file(
    h: np.ndarray, ref: PackedBin, qry: PackedBin, strand: str, chunk: int
) -> list[np.ndarray]:
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


STAGE_THREADS = 4  # a unit's files formatted and made digest runs at once (numba's loops and
# numpy's sort release the GIL)


def write_tarball(path: Path, files: list[tuple[str, Path]]) -> None:
    """A byte-reproducible .tar.gz at `path` (synced; the caller renames it into place):
    entries (name, staged file) in emission order, mode 0644, mtime 0, bare names."""
    with (
        durable.new_file(path) as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz,
    ):
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            for name, staged in files:
                data = staged.read_bytes()
                info = tarfile.TarInfo(name)
                info.size, info.mode, info.mtime = len(data), 0o644, 0
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                tar.addfile(info, io.BytesIO(data))


def table_lookup(m: Manifest) -> Callable[[str, int, str], PackedBin]:
    """(side, bin, strand) -> record table, from the manifest's names and lengths."""
    cache: dict[tuple[str, int, str], PackedBin] = {}

    def lookup(side: str, b: int, strand: str) -> PackedBin:
        key = (side, b, strand)
        if key not in cache:
            ref = side == "reference"
            bins = m.plan.ref_bins if ref else m.plan.query_bins
            names = m.ref_names if ref else m.qry_names
            lengths = m.ref_lengths if ref else m.qry_lengths
            prefix = m.options.target_prefix if ref else m.options.query_prefix
            cache[key] = table_from(
                [names[i] for i in bins[b]], [lengths[i] for i in bins[b]], prefix, strand
            )
        return cache[key]

    return lookup
