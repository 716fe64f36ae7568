"""The reference index: a reference's bins with their seed tables and score codes, built once
(`hspZ index`) and loaded by `hspZ run --index` instead of rebuilt.

    DIR/MANIFEST   text, `key value` lines: format and hspZ versions, the seed pattern, step and
                   layout flags, every record's name and length, the records hash
                   (`sequence.records_digest`), the source file's size, sha256 and the sha256 of
                   each of its SOURCE_PIECE pieces (`source_pieces`), the bins, and
                   each array's length and piece checksums; its last line is a sha256 of the
                   lines before it
    DIR/READY      written last, before the folder is renamed into place
    DIR/000/ ...   one folder per bin: `index_table` (u32, 4^weight entries), `pos_table` (u32)
                   and `enc` (u8: the packed bin's score codes, its final '&' included), raw
                   little-endian arrays without headers

An index is built in a sibling `DIR.tmp` folder (held by a lock beside it, so a killed build's
folder is known to be dead and is removed by the next build), every file fsynced, then renamed
onto DIR, which must not exist.  A reader trusts nothing it has not checked: MANIFEST's own
checksum, its format version and READY when the index is opened; each array's length and the
sha256 of every 64 MiB piece as the bin loads, before the piece is handed on (to the CPU engine
or the device), so a damaged file never reaches either.

The seed codes are not stored: a base's seed code is its score code when that is below 4 (ACGT)
and 4 otherwise, and the table is already built from them.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import socket
import stat
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hspz import __version__
from hspz.core import durable, faults, hashing
from hspz.core.errors import InputError, UsageError, in_flight
from hspz.core.hashing import file_pieces, file_sha256
from hspz.formats.sealed import checksum_line, sealed
from hspz.io.packing import pack_bin, score_codes, seed_codes
from hspz.io.records import MAX_BIN_BP, Record
from hspz.planning import bins as planning
from hspz.stages.seed import SeedShape, SeedTable, build_seed_table

if TYPE_CHECKING:
    from hspz.core.options import Options
    from hspz.io.digests import KnownRecords

FORMAT = 1
PIECE = 64 << 20  # bytes per checksummed piece of an array: verified before it is used
ARRAYS: dict[str, np.dtype] = {
    "index_table": np.dtype("<u4"),
    "pos_table": np.dtype("<u4"),
    "enc": np.dtype("u1"),
}
READY = "READY"
MANIFEST = "MANIFEST"


def bin_folder(b: int) -> str:
    return f"{b:03d}"


# --------------------------------------------------------------------------------------------
# Checksums
# --------------------------------------------------------------------------------------------


def piece_digests(data: np.ndarray | bytes, threads: int = 0, piece: int = PIECE) -> list[str]:
    """sha256 of each `piece` bytes of `data` (the last piece may be shorter; one hash of
    nothing for no bytes), on threads: hashlib releases the GIL while it hashes.  A source
    file's bytes in SOURCE_PIECE pieces give the hashes `file_pieces` gives the file."""
    array = np.frombuffer(data, np.uint8) if isinstance(data, bytes) else data
    raw = np.ascontiguousarray(array).data.cast("B")
    cuts = range(0, max(len(raw), 1), piece)
    if len(cuts) == 1:
        return [hashlib.sha256(raw).hexdigest()]
    with ThreadPoolExecutor(threads or os.cpu_count() or 1) as pool:
        return list(pool.map(lambda a: hashlib.sha256(raw[a : a + piece]).hexdigest(), cuts))


SOURCE_PIECE = hashing.PIECE  # bytes per hashed piece of the source file (`file_pieces`)


# --------------------------------------------------------------------------------------------
# The manifest
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ArrayEntry:
    length: int  # elements
    pieces: tuple[str, ...]  # sha256 of each PIECE bytes


@dataclass
class IndexManifest:
    """What an index holds, as its MANIFEST says."""

    pattern: str
    step: int
    seq_block_size: int
    kegalign_bins: bool
    names: list[str]
    lengths: list[int]
    records_digest: str
    source_size: int
    source_sha256: str
    bins: planning.Bins
    arrays: dict[tuple[int, str], ArrayEntry] = field(default_factory=dict)
    version: str = __version__
    source_pieces: tuple[str, ...] = ()  # sha256 of each SOURCE_PIECE bytes (none: older)

    def lines(self) -> list[str]:
        out = [
            f"hspz-index {FORMAT}",
            f"hspz_version {self.version}",
            f"pattern {self.pattern}",
            f"step {self.step}",
            f"seq_block_size {self.seq_block_size}",
            f"kegalign_bins {int(self.kegalign_bins)}",
            f"source_size {self.source_size}",
            f"source_sha256 {self.source_sha256}",
        ]
        if self.source_pieces:
            out.append(f"source_pieces {SOURCE_PIECE} {','.join(self.source_pieces)}")
        out += [f"records {len(self.names)} {self.records_digest}"]
        out += [
            f"record {i} {n} {name}"
            for i, (name, n) in enumerate(zip(self.names, self.lengths, strict=True))
        ]
        out.append(f"bins {len(self.bins)}")
        for b, members in enumerate(self.bins):
            out.append(
                f"bin {b} {sum(self.lengths[k] for k in members)} " + ",".join(map(str, members))
            )
            for name in ARRAYS:
                e = self.arrays[(b, name)]
                out.append(f"array {b} {name} {e.length} {','.join(e.pieces)}")
        return out

    def to_text(self) -> str:
        body = "".join(f"{line}\n" for line in self.lines())
        return sealed(body)

    def bin_bp(self, b: int) -> int:
        return sum(self.lengths[k] for k in self.bins[b])


def parse_manifest(text: str, source: str) -> IndexManifest:
    """An IndexManifest from MANIFEST's text; InputError for a damaged or foreign one."""
    body, _, last = text.rstrip("\n").rpartition("\n")
    body += "\n"
    if last.encode("utf-8") != checksum_line(body.encode("utf-8")):
        raise InputError(
            f"{source}: the index MANIFEST fails its checksum (it was edited or "
            f"damaged; rebuild the index)"
        )
    rows = [line.split(" ") for line in body.splitlines()]
    if not rows or rows[0][0] != "hspz-index":
        raise InputError(f"{source}: not an hspZ index MANIFEST")
    if rows[0][1:] != [str(FORMAT)]:
        raise InputError(
            f"{source}: index format {' '.join(rows[0][1:])}; this hspZ reads "
            f"format {FORMAT} (rebuild the index)"
        )
    try:
        return _manifest_from(rows)
    except (KeyError, ValueError, IndexError) as exc:
        raise InputError(f"{source}: malformed index MANIFEST ({exc})") from None


def _manifest_from(rows: list[list[str]]) -> IndexManifest:
    one = {r[0]: r[1:] for r in rows if r[0] not in ("record", "bin", "array")}
    names: list[str] = []
    lengths: list[int] = []
    bins: list[tuple[int, ...]] = []
    arrays: dict[tuple[int, str], ArrayEntry] = {}
    for r in rows:
        if r[0] == "record":
            if int(r[1]) != len(names):
                raise ValueError(f"record {r[1]} out of order")
            lengths.append(int(r[2]))
            names.append(" ".join(r[3:]))
        elif r[0] == "bin":
            if int(r[1]) != len(bins):
                raise ValueError(f"bin {r[1]} out of order")
            bins.append(tuple(int(k) for k in r[3].split(",")))
        elif r[0] == "array":
            if r[2] not in ARRAYS:
                raise ValueError(f"unknown array {r[2]}")
            arrays[(int(r[1]), r[2])] = ArrayEntry(int(r[3]), tuple(r[4].split(",")))
    if len(names) != int(one["records"][0]) or len(bins) != int(one["bins"][0]):
        raise ValueError("record or bin count")
    if sorted(k for b in bins for k in b) != list(range(len(names))):
        raise ValueError("bins are not a partition of the records")
    if set(arrays) != {(b, a) for b in range(len(bins)) for a in ARRAYS}:
        raise ValueError("arrays missing")
    return IndexManifest(
        one["pattern"][0],
        int(one["step"][0]),
        int(one["seq_block_size"][0]),
        one["kegalign_bins"][0] == "1",
        names,
        lengths,
        one["records"][1],
        int(one["source_size"][0]),
        one["source_sha256"][0],
        tuple(bins),
        arrays,
        one["hspz_version"][0],
        _source_pieces(
            one.get("source_pieces"), int(one["source_size"][0]), one["source_sha256"][0]
        ),
    )


def _source_pieces(row: list[str] | None, size: int, sha256: str) -> tuple[str, ...]:
    """The source file's piece hashes (an index of an older hspZ has none): exactly one sha256
    hex for each SOURCE_PIECE bytes of the `size` recorded (one for an empty file), and a file
    of one piece has the whole file's sha256 as its piece's."""
    if row is None:
        return ()
    if len(row) != 2 or int(row[0]) != SOURCE_PIECE:
        raise ValueError(f"source_pieces is not '{SOURCE_PIECE} HASH,HASH,...'")
    pieces = tuple(row[1].split(","))
    if len(pieces) != max(1, -(-size // SOURCE_PIECE)):
        raise ValueError(f"{len(pieces)} source piece hash(es) for a file of {size} bytes")
    if not all(len(h) == 64 and set(h) <= set("0123456789abcdef") for h in pieces):
        raise ValueError("a source piece hash is not 64 hex digits")
    if len(pieces) == 1 and pieces[0] != sha256:
        raise ValueError("the source file's one piece hash is not its sha256")
    return pieces


# --------------------------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------------------------


def check_bin_sizes(bins: planning.Bins, lengths: Sequence[int]) -> None:
    """Every bin's packed size (records and separators) below MAX_BIN_BP, before building."""
    for b, members in enumerate(bins):
        packed = sum(lengths[k] for k in members) + len(members) - 1
        if packed >= MAX_BIN_BP:
            raise UsageError(
                f"-B: bin {b} would hold {packed} bases with its separators; bins "
                f"must stay below {MAX_BIN_BP} bp (use a smaller -B)"
            )


@dataclass
class BuiltBin:
    """One bin's arrays, ready to write."""

    index: int
    index_table: np.ndarray
    pos_table: np.ndarray
    enc: np.ndarray

    def arrays(self) -> dict[str, np.ndarray]:
        return {"index_table": self.index_table, "pos_table": self.pos_table, "enc": self.enc}


def build_bin_host(b: int, records: Sequence[Record], shape: SeedShape, step: int) -> BuiltBin:
    """One bin's arrays on the CPU: the packed bases' score codes and KegAlign's seed table."""
    packed = pack_bin(list(records))
    table = build_seed_table(seed_codes(packed.buf), packed.block_len, shape, step)
    return BuiltBin(b, table.index_table, table.pos_table, score_codes(packed.buf))


@contextmanager
def building(dest: Path) -> Iterator[Path]:
    """The sibling DIR.tmp folder to build into, under an exclusive lock beside it (DIR.tmp.lock,
    `durable.open_lock`: never through a link, never a user's file); renamed onto DEST when the
    block succeeds, removed when it fails.  A DIR.tmp left by a killed build (it carries
    hspZ's mark, and its lock is free, so its builder is gone) is removed; one hspZ did not
    make is refused, never removed."""
    tmp, lock_path = build_names(dest)
    if os.path.lexists(tmp):
        durable.check_holds_no_input(tmp)  # before the lock is touched
    fd = durable.open_lock(lock_path, "--index")
    ours = False  # the lock file is removed at the end only once it is known to be ours
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip()
            raise UsageError(
                f"--index: another hspZ index is building {dest} ({holder or 'holder unknown'})"
            ) from None
        durable.check_lock(fd, lock_path, "--index")
        ours = True
        durable.write_lock(
            fd,
            durable.lock_record(pid=os.getpid(), host=socket.gethostname(), command="hspZ index"),
        )
        if os.path.lexists(tmp) and not durable.remove_marked(tmp):
            raise UsageError(
                f"--index: {tmp} exists and was not made by hspZ index; it is "
                f"never removed (move it away, or name another index folder)"
            )
        durable.guard("--index", tmp)
        durable.make_marked(tmp)
        try:
            yield tmp
            faults.point("index-built")
            if os.path.lexists(dest):
                raise UsageError(f"--index: {dest} appeared while the index was built")
            durable.fsync_dir(tmp)
            os.rename(tmp, dest)
            durable.fsync_dir(dest.parent)
            (dest / durable.MARK).unlink()  # the index is a result now, not a build folder
            durable.fsync_dir(dest)
        except BaseException:
            durable.remove_marked(tmp)
            raise
    finally:
        if ours:
            durable.remove_own(lock_path, fd)
        os.close(fd)


def build_names(dest: Path) -> tuple[Path, Path]:
    """The build folder and its lock that `building` derives from the index path."""
    return dest.with_name(dest.name + ".tmp"), dest.with_name(dest.name + ".tmp.lock")


def write_bin(tmp: Path, built: BuiltBin, threads: int = 0) -> dict[str, ArrayEntry]:
    """Write one bin's arrays (fsynced) into its folder; their manifest entries."""
    folder = tmp / bin_folder(built.index)
    folder.mkdir()
    entries = {}
    for name, array in built.arrays().items():
        data = np.ascontiguousarray(array, ARRAYS[name])
        durable.write_new(folder / name, data.tofile)
        entries[name] = ArrayEntry(len(data), tuple(piece_digests(data, threads)))
    durable.fsync_dir(folder)
    return entries


def write_text_synced(path: Path, text: str) -> None:
    """A new file of the build folder."""
    durable.write_new(path, text.encode("utf-8"))


# --------------------------------------------------------------------------------------------
# Opening and loading
# --------------------------------------------------------------------------------------------


@dataclass
class Index:
    """An opened index: its folder and its verified MANIFEST."""

    path: Path
    manifest: IndexManifest
    loads: list[float] = field(default_factory=list)  # seconds of each bin load, for reports

    @property
    def bins(self) -> planning.Bins:
        return self.manifest.bins

    def array_path(self, b: int, name: str) -> Path:
        return self.path / bin_folder(b) / name

    def read_array(
        self, b: int, name: str, sink: Callable[[int, np.ndarray], None], threads: int = 0
    ) -> int:
        """Stream array `name` of bin b to `sink(first element, elements)` piece by piece, each
        piece verified against its recorded sha256 before it is handed on; the length.  A few
        pieces are read and hashed ahead on threads (reads and hashing release the GIL)."""
        entry = self.manifest.arrays[(b, name)]
        dtype = ARRAYS[name]
        path = self.array_path(b, name)
        size = entry.length * dtype.itemsize
        where = f"index {self.path}: bin {bin_folder(b)} {name}"
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            raise InputError(f"{where}: cannot read it ({exc.strerror})") from None
        try:
            actual = os.fstat(fd).st_size
            if actual != size:
                raise InputError(
                    f"{where}: {actual} bytes, the MANIFEST records {size} "
                    f"(truncated or replaced; rebuild the index)"
                )
            cuts = list(range(0, size, PIECE))
            if len(cuts) != max(len(entry.pieces), 1) and size:
                raise InputError(f"{where}: the MANIFEST records {len(entry.pieces)} pieces")

            def piece(k: int) -> np.ndarray:
                data = os.pread(fd, min(PIECE, size - cuts[k]), cuts[k])
                if hashlib.sha256(data).hexdigest() != entry.pieces[k]:
                    raise InputError(
                        f"{where}: bytes {cuts[k]}..{cuts[k] + len(data)} fail "
                        f"their checksum (the file is damaged; rebuild the index)"
                    )
                return np.frombuffer(data, dtype)

            ahead = max(1, min(threads or os.cpu_count() or 1, 8))
            with ThreadPoolExecutor(ahead) as pool:
                pending: list[Future[np.ndarray] | None] = [
                    pool.submit(piece, k) for k in range(min(ahead, len(cuts)))
                ]
                for k in range(len(cuts)):
                    arr = pending[k].result()  # type: ignore[union-attr]  # None once taken
                    pending[k] = None
                    if k + ahead < len(cuts):
                        pending.append(pool.submit(piece, k + ahead))
                    sink(cuts[k] // dtype.itemsize, arr)
        finally:
            os.close(fd)
        return entry.length

    def load_host(self, b: int, threads: int = 0) -> BuiltBin:
        """Bin b's three arrays in host memory, every piece verified."""
        out = {}
        for name, dtype in ARRAYS.items():
            array = np.empty(self.manifest.arrays[(b, name)].length, dtype)

            def put(first: int, piece: np.ndarray, array: np.ndarray = array) -> None:
                array[first : first + len(piece)] = piece

            self.read_array(b, name, put, threads)
            out[name] = array
        return BuiltBin(b, out["index_table"], out["pos_table"], out["enc"])

    def table(self, b: int, threads: int = 0) -> SeedTable:
        loaded = self.load_host(b, threads)
        return SeedTable(loaded.index_table, loaded.pos_table)

    def histogram(self, b: int) -> np.ndarray:
        """How many reference positions of bin b hold each k-mer (hits-estimate), from its
        verified index_table alone."""
        table = np.empty(self.manifest.arrays[(b, "index_table")].length, np.uint32)

        def put(first: int, piece: np.ndarray) -> None:
            table[first : first + len(piece)] = piece

        self.read_array(b, "index_table", put)
        return np.diff(table.astype(np.int64), prepend=0)


def open_index(path: str | os.PathLike) -> Index:
    """The index at `path`, its MANIFEST checked; InputError for anything that is not a
    complete index of this format."""
    p = Path(path)
    if not p.is_dir():
        raise InputError(f"--index: {p} is not an index folder (build one with `hspZ index`)")
    if not (p / READY).is_file():
        raise InputError(
            f"--index: {p} has no READY marker (an unfinished or damaged index; rebuild it)"
        )
    try:
        text = (p / MANIFEST).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(
            f"--index: cannot read {p / MANIFEST}: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    return Index(p, parse_manifest(text, str(p / MANIFEST)))


def seed_codes_of(enc: np.ndarray) -> np.ndarray:
    """Seed codes from score codes: ACGT (0..3) stay, every other symbol is 4."""
    return np.minimum(enc, 4).astype(np.uint8)


# --------------------------------------------------------------------------------------------
# Using an index in a run
# --------------------------------------------------------------------------------------------


def open_checked(
    path: str, options: Options, reference: str | None
) -> tuple[Index, KnownRecords, Verification | None]:
    """(index, its known records, the background Verification of `reference` or None): the
    index at `path` opened and checked against the run's options, as a run that reads its
    reference from an index starts."""
    idx = open_index(path)
    check_options(idx, options)
    verify = Verification(reference, idx) if reference else None
    return idx, known_records(idx), verify


def check_options(idx: Index, options: Options) -> None:
    """--seed, --step, -B and --kegalign-bins must be the values the index was built with."""
    m = idx.manifest
    given = {
        "--seed": (options.pattern, m.pattern),
        "--step": (options.step, m.step),
        "--seq-block-size": (options.seq_block_size, m.seq_block_size),
        "--kegalign-bins": (options.kegalign_bins, m.kegalign_bins),
    }
    for flag, (mine, built) in given.items():
        if mine != built:
            raise UsageError(
                f"--index: {flag} is {_shown(mine)} here but the index {idx.path} "
                f"was built with {_shown(built)}; give the same value or build "
                f"another index"
            )


def _shown(value: object) -> str:
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def check_plan(idx: Index, ref_bins: planning.Bins) -> None:
    """The resolved plan must have exactly the index's bins (the memory preflight may have
    halved -B: an index is never rebuilt on the fly)."""
    if tuple(ref_bins) != tuple(idx.bins):
        raise UsageError(
            f"--index: this run's plan has {len(ref_bins)} reference bin(s) where "
            f"the index {idx.path} has {len(idx.bins)} (the memory preflight "
            f"shrank -B to fit the device); build an index with a smaller -B"
        )


def check_reference(
    idx: Index, names: Sequence[str], lengths: Sequence[int], digest: str, source: str
) -> None:
    """The index must be of the reference a plan was made from: the same record names and
    lengths in order, and the same records hash (`plan` and `run` check the same)."""
    m = idx.manifest
    if list(m.names) != list(names) or list(m.lengths) != list(lengths):
        diff = _first_difference(m.names, m.lengths, names, lengths, "in the index", "planned")
        raise InputError(
            f"--index: {idx.path}: its records differ from the reference {source} was "
            f"planned with: {diff}"
        )
    if digest != "-" and m.records_digest != digest:
        raise InputError(
            f"--index: {idx.path}: its bases differ from the reference {source} "
            f"was planned with (records hash {m.records_digest[:16]}… there, "
            f"{digest[:16]}… planned), though every name and length matches"
        )


def known_records(idx: Index) -> KnownRecords:
    """The index's reference as records known by name and length (and the records hash)."""
    from hspz.io.digests import KnownRecords

    m = idx.manifest
    return KnownRecords(m.names, m.lengths, m.records_digest)


class Verification:
    """The reference checked against the index on a thread of its own while the run goes on.
    The file the index was built from (the same size and sha256 as its MANIFEST records) is
    verified by those alone; any other file (a FASTA of the same genome, an edited copy) by
    its records: the same names and lengths, and the same records hash (so an edit that keeps
    every length is caught).  `wait` blocks until it is done and raises its verdict."""

    def __init__(self, reference: str, idx: Index):
        import threading

        self.reference, self.idx = reference, idx
        self.seconds = 0.0
        self.by_file = False  # verified by the file's size and sha256 (no record decoded)
        self.waited: dict[str, float] = {}
        self._shaped = threading.Event()  # names and lengths compared (or the check failed)
        self._error: BaseException | None = None
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="verify")
        self._future = self._pool.submit(self._check)

    def _check(self) -> str:
        import time

        from hspz.io.digests import records_digest
        from hspz.io.readers import read_side

        t = time.perf_counter()
        m = self.idx.manifest
        try:
            if same_file(self.reference, m.source_size, m.source_sha256, m.source_pieces):
                self.by_file = True
                self.seconds = time.perf_counter() - t
                return m.records_digest
            records = read_side(self.reference, "reference")
            names, lengths = [r.name for r in records], [len(r) for r in records]
            if names != m.names or lengths != m.lengths:
                raise InputError(
                    f"{self.reference}: its records ({len(names)}) differ from "
                    f"those of the index {self.idx.path} ({len(m.names)}): "
                    f"{_first_difference(names, lengths, m.names, m.lengths)}"
                )
        except BaseException as exc:
            self._error = exc
            raise
        finally:
            self._shaped.set()
        digest = records_digest(records)
        del records
        if digest != m.records_digest:
            raise InputError(
                f"{self.reference}: the bases differ from those the index "
                f"{self.idx.path} was built from (records hash {digest[:16]}… "
                f"here, {m.records_digest[:16]}… there), though every name and "
                f"length matches"
            )
        self.seconds = time.perf_counter() - t
        return digest

    def wait(self, label: str) -> str:
        """The records hash once verified; the seconds blocked go to `waited[label]`."""
        import time

        t = time.perf_counter()
        try:
            return self._future.result()
        finally:
            self.waited[label] = self.waited.get(label, 0.0) + time.perf_counter() - t

    def wait_shape(self, label: str) -> None:
        """Block until the names and lengths are compared: a reference of other records is
        refused before any engine runs (the bases' hash goes on in the background)."""
        import time

        t = time.perf_counter()
        self._shaped.wait()
        self.waited[label] = self.waited.get(label, 0.0) + time.perf_counter() - t
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        """Wait for the check to end, unless an exception (an interrupt) is on its way out: a
        check blocked reading the reference (a FIFO) must not hold the exit up."""
        self._pool.shutdown(wait=not in_flight(), cancel_futures=True)


def same_file(path: str, size: int, sha256: str, pieces: tuple[str, ...] = ()) -> bool:
    """Whether the file holds exactly these bytes: its pieces' hashes (`file_pieces`) when
    recorded, else its sha256 (`file_sha256`).  Its size is compared first, so only a regular
    file of the recorded size is hashed (a FIFO or device is never opened here).  A file that
    cannot be read, or changes while it is hashed, is not the same (the records check that
    follows says why)."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size != size:
            return False
        if pieces:
            return file_pieces(path) == (size, pieces)
        return file_sha256(path) == (size, sha256)
    except OSError:
        return False


def _first_difference(
    names: Sequence[str],
    lengths: Sequence[int],
    want_names: Sequence[str],
    want_lengths: Sequence[int],
    here: str = "here",
    there: str = "in the index",
) -> str:
    mine, theirs = (
        list(zip(names, lengths, strict=True)),
        list(zip(want_names, want_lengths, strict=True)),
    )
    for i, ((n, k), (wn, wk)) in enumerate(zip(mine, theirs, strict=False)):
        if (n, k) != (wn, wk):
            return f"record {i + 1} is {n!r} ({k} bp) {here}, {wn!r} ({wk} bp) {there}"
    return f"{len(names)} records {here}, {len(want_names)} {there}"
