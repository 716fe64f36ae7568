"""Sequences: reading FASTA / gzip / 2bit into records, packing records into bins, the two
alphabets (seeding and scoring) and the reverse complement of a packed bin.

Everything here works on numpy byte arrays, never on Python strings per base: FASTA is parsed
with a few whole-file array passes, 2bit is decoded with one 256-entry lookup, and a Python loop
runs at most once per record (or once per 2bit block when a record has only a few blocks, or
unordered ones). The rules are behaviour.md section 2 ("Input" and "Packing a bin"); the 2bit
layout is UCSC's (kent twoBit.c).

Bad input never escapes as a raw Python exception: it becomes one `InputError` line naming the
file and the problem.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import os
import struct
import zlib
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from hspz.core import jit
from hspz.core.errors import InputError
from hspz.core.jit import njit
from hspz.core.names import name_problem

PathLike = str | os.PathLike[str]

GZIP_MAGIC = b"\x1f\x8b"
TWOBIT_SIGNATURE = 0x1A412743
TWOBIT_MAGIC = {b"\x1a\x41\x27\x43": ">", b"\x43\x27\x41\x1a": "<"}
MAX_BIN_BP = 4_294_967_295  # records and bins must stay below this (u32 positions)
SEPARATOR = ord("&")

_WHITESPACE = b" \t\n\r\v\f"
_NEWLINE = ord("\n")
_TWOBIT_BASES = b"TCAG"  # 2bit codes 0..3
_TWOBIT_HEADER = 16
_NO_BLOCKS = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class Record:
    """One sequence: its unprefixed name and its bytes (1-D uint8, case kept)."""

    name: str
    seq: np.ndarray

    def __post_init__(self) -> None:
        seq = self.seq
        if type(seq) is np.ndarray and seq.dtype == np.uint8 and seq.ndim == 1:
            return  # the common case, kept cheap: readers build one Record per sequence
        if isinstance(seq, bytes | bytearray | memoryview):
            seq = np.frombuffer(seq, dtype=np.uint8)
        seq = np.asarray(seq)
        if seq.dtype != np.uint8 or seq.ndim != 1:
            raise ValueError(f"Record {self.name!r}: seq must be a 1-D uint8 array")
        object.__setattr__(self, "seq", seq)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return self.name == other.name and np.array_equal(self.seq, other.seq)

    def __hash__(self) -> int:
        return hash((self.name, len(self.seq)))

    def __len__(self) -> int:
        return len(self.seq)


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


def _format_of(head: bytes) -> str:
    if head[:4] in TWOBIT_MAGIC:
        return "2bit"
    if head[:2] == GZIP_MAGIC:
        return "gzip"
    return "fasta"


def _read_file(path: PathLike, size: int = -1) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(size)
    except OSError as exc:
        raise InputError(f"cannot read {os.fspath(path)}: {exc.strerror or exc}") from exc


def detect_format(path: PathLike) -> str:
    """'2bit', 'gzip' or 'fasta', decided by the file's magic bytes (never its extension)."""
    return _format_of(_read_file(path, 4))


def read_records(path: PathLike) -> list[Record]:
    """Every record of a FASTA, gzip (FASTA or 2bit inside) or 2bit file, in file order."""
    source = os.fspath(path)
    data = _read_file(path)
    kind = _format_of(data)
    if kind == "gzip":
        data = _gunzip(data, source)
        kind = "2bit" if _format_of(data) == "2bit" else "fasta"
    if kind == "2bit":
        return read_2bit_bytes(data, source)
    return read_fasta_bytes(data, source)


def _gunzip(data: bytes, source: str) -> bytes:
    # gzip.decompress reads every member, so bgzip and `cat a.gz b.gz` both work.
    try:
        return gzip.decompress(data)
    except EOFError as exc:
        raise InputError(f"{source}: truncated gzip stream ({exc})") from exc
    except (OSError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise InputError(f"{source}: corrupt gzip data ({exc})") from exc


# ---- FASTA -----------------------------------------------------------------------------------

_BOM = b"\xef\xbb\xbf"  # UTF-8's byte-order mark, which some editors put first
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_CR = ord("\r")
_BLANKS = b" \t"
# Nucleotides for the protein rule: A, C, G, T, U and N of either case, and X, the hard-mask
# letter of RepeatMasker -x (half a mammalian genome can be X).  IUPAC ambiguity letters are
# not counted: they are amino-acid letters too, and real DNA holds few of them.
_NUCLEOTIDE = np.zeros(256, np.bool_)
_NUCLEOTIDE[list(b"ACGTUNXacgtunx")] = True
PROTEIN_SAMPLE = 1 << 20  # bases the protein rule looks at: evenly spaced, all of a small file


def read_fasta_bytes(data: bytes, source: str) -> list[Record]:
    """Parse FASTA bytes (vectorised: whole-buffer passes, one Python step per record).

    Lines may end in LF, CRLF or CR alone; a UTF-8 byte-order mark is skipped; a header is a
    line whose first byte other than spaces and tabs is '>'.  Refused: a file without a header
    or without a single base, a bad or repeated name, and a file whose bases are mostly not
    nucleotides (`_refuse_protein`)."""
    if len(data) == 0:
        raise InputError(f"{source}: empty file")
    if data.startswith(_UTF16_BOMS):
        raise InputError(f"{source}: UTF-16 text; FASTA must be ASCII (or UTF-8)")
    arr = np.frombuffer(data, dtype=np.uint8)
    heads = _header_starts(data, arr, len(_BOM) if data.startswith(_BOM) else 0)
    if heads.size == 0:
        raise InputError(f"{source}: no FASTA records (no line starts with '>')")
    ends = _line_ends(data, heads)
    names = [_header_name(data, int(s), int(e), source) for s, e in zip(heads, ends, strict=True)]
    refuse_duplicates(names, source)
    keep = _sequence_mask(arr, heads, ends)
    bases = arr[keep]
    if bases.size == 0:
        raise InputError(f"{source}: no sequence bases (only headers)")
    _refuse_protein(bases, source)
    # np.add.reduceat would widen the whole mask; count_nonzero per record is far faster
    cuts = [*heads.tolist(), len(arr)]
    counts = [np.count_nonzero(keep[a:b]) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    bounds = np.zeros(len(heads) + 1, dtype=np.int64)
    np.cumsum(counts, out=bounds[1:])
    return [Record(name, bases[bounds[i] : bounds[i + 1]]) for i, name in enumerate(names)]


def _header_starts(data: bytes, arr: np.ndarray, begin: int) -> np.ndarray:
    """Offsets of every '>' that begins a header: at `begin` (0, or just past a byte-order
    mark), after a line end (LF or CR), or after spaces and tabs that follow one."""
    gt = np.flatnonzero(arr == ord(">"))
    before = arr[np.maximum(gt - 1, 0)]
    start = (gt == begin) | (before == _NEWLINE) | (before == _CR)
    for i in np.flatnonzero(~start & ((before == 32) | (before == 9))).tolist():
        start[i] = _blanks_from_line_start(data, int(gt[i]), begin)
    return gt[start]


def _blanks_from_line_start(data: bytes, at: int, begin: int) -> bool:
    """Whether only spaces and tabs lie between the start of the line and offset `at` (the
    walk back covers the blanks only, so all of them cost a file's size at most)."""
    j = at - 1
    while j >= begin and data[j] in _BLANKS:
        j -= 1
    return j < begin or data[j] in (_NEWLINE, _CR)


def _line_ends(data: bytes, starts: np.ndarray) -> np.ndarray:
    """For each line start, the offset just past its line end, LF or CR (or the data's end).
    The next LF is searched for once per LF found, so a file without any costs one scan."""
    size = len(data)
    ends = np.empty(len(starts), dtype=np.int64)
    lf = -2  # the first LF at or after the last search's start; -1: none left in the file
    for i, s in enumerate(starts.tolist()):
        if -1 < lf < s or lf == -2:
            lf = data.find(b"\n", s)
        stop = size if lf < 0 else lf
        cr = data.find(b"\r", s, stop)
        ends[i] = min(size, (cr if cr >= 0 else stop) + 1)
    return ends


def _header_name(data: bytes, start: int, end: int, source: str) -> str:
    tokens = data[start + 1 : end].split(maxsplit=1)
    where = functools.partial(_line_number, data, start, source)
    if not tokens:
        raise InputError(f"{where()}FASTA header has an empty name")
    try:
        name = tokens[0].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{where()}FASTA name is not valid UTF-8") from exc
    problem = name_problem(name)
    if problem:
        raise InputError(f"{where()}record name {ascii(name)} {problem}")
    return name


def _line_number(data: bytes, offset: int, source: str) -> str:
    """'SOURCE: line N: ' for `offset`, counting LF, CRLF and lone-CR line ends (an error's
    prefix: it scans the file up to `offset`)."""
    ends = data.count(b"\n", 0, offset) + data.count(b"\r", 0, offset)
    ends -= data.count(b"\r\n", 0, offset)
    return f"{source}: line {ends + 1}: "


def refuse_duplicates(names: Sequence[str], source: str) -> None:
    """One file's record names must differ: two equal names give output lines that cannot be
    told apart."""
    first: dict[str, int] = {}
    for i, name in enumerate(names):
        j = first.setdefault(name, i)
        if j != i:
            raise InputError(
                f"{source}: record name {ascii(name)} is used twice (records {j + 1} and {i + 1})"
            )


def _refuse_protein(bases: np.ndarray, source: str) -> None:
    """Refuse a file whose bases are mostly (over half) not nucleotides (`_NUCLEOTIDE`): a
    protein FASTA would run to no seeds and no word.  Protein is about a quarter A, C, G, T, N;
    DNA, soft-masked, N-gapped or X-masked, nearly all.  An evenly spaced sample of at most
    PROTEIN_SAMPLE bases decides, so a genome costs no extra pass."""
    sample = bases[:: -(-len(bases) // PROTEIN_SAMPLE)]
    nucleotides = int(np.count_nonzero(_NUCLEOTIDE[sample]))
    if 2 * nucleotides < len(sample):
        share = 100 * (len(sample) - nucleotides) // len(sample)
        raise InputError(
            f"{source}: {share}% of the bases are not nucleotides (A, C, G, T, U, N or X, either "
            "case): protein or other non-DNA sequence"
        )


def _sequence_mask(arr: np.ndarray, heads: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """True for the bytes that are sequence: not whitespace, not a header line, not before
    the first header."""
    keep = arr > ord(" ")  # every whitespace byte is <= ' '; refine only the few low bytes
    low = np.flatnonzero(~keep)
    keep[low] = ~np.isin(arr[low], np.frombuffer(_WHITESPACE, dtype=np.uint8))
    keep[: heads[0]] = False
    keep[_ranges_index(heads, ends)] = False
    return keep


def _ranges_index(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """All offsets of the half-open ranges [starts[i], ends[i]), concatenated (vectorised)."""
    sizes = ends - starts
    firsts = np.cumsum(sizes) - sizes
    return np.arange(int(sizes.sum()), dtype=np.int64) + np.repeat(starts - firsts, sizes)


# ---- 2bit --------------------------------------------------------------------------------------


def _twobit_lut() -> np.ndarray:
    """uint32 per packed byte whose 4 memory bytes are its 4 bases, first base in the high bits."""
    codes = np.arange(256, dtype=np.uint8)
    shifts = np.array([6, 4, 2, 0], dtype=np.uint8)
    bases = np.frombuffer(_TWOBIT_BASES, dtype=np.uint8)
    quads = np.ascontiguousarray(bases[(codes[:, None] >> shifts) & 3])
    return quads.view(np.uint32).reshape(256)


_TWOBIT_LUT = _twobit_lut()
SMALL_BYTES = 1 << 26  # numpy translates below this while numba is not loaded (`_lookup`)
_THREADED_BYTES = 1 << 24  # smaller 2bit files unpack on the calling thread


def read_2bit_bytes(data: bytes, source: str) -> list[Record]:
    """Parse UCSC 2bit bytes (either byte order, version 0 or 1), records in index order."""
    if len(data) == 0:
        raise InputError(f"{source}: empty file")
    order = TWOBIT_MAGIC.get(bytes(data[:4]))
    if order is None:
        raise InputError(f"{source}: not a 2bit file (bad signature)")
    try:
        index = _twobit_index(data, order, source)
        refuse_duplicates([name for name, _ in index], source)
        records = _twobit_records(data, order, index, source)
    except struct.error as exc:
        raise InputError(f"{source}: truncated 2bit file ({exc})") from exc
    if not any(len(rec) for rec in records):
        raise InputError(f"{source}: no sequence bases (every record is empty)")
    return records


def _twobit_records(data: bytes, order: str, index: list[tuple[str, int]],
                    source: str) -> list[Record]:
    arr = np.frombuffer(data, dtype=np.uint8)
    unpack = functools.partial(_twobit_record, data, arr, order, source=source)
    if len(index) == 1 or len(data) < _THREADED_BYTES:
        return [unpack(name, off) for name, off in index]
    # Records unpack independently, and numpy's gather and the numba loops release the GIL:
    # a genome's chromosomes unpack on every core (map raises the first error in order).
    with ThreadPoolExecutor(min(len(index), os.cpu_count() or 1)) as pool:
        return list(pool.map(unpack, *zip(*index, strict=True)))


def _twobit_index(data: bytes, order: str, source: str) -> list[tuple[str, int]]:
    if len(data) < _TWOBIT_HEADER:
        raise InputError(f"{source}: truncated 2bit header")
    _, version, count, _ = struct.unpack_from(order + "IIII", data, 0)
    if version not in (0, 1):
        raise InputError(f"{source}: unsupported 2bit version {version} (expected 0 or 1)")
    off_fmt = order + ("Q" if version == 1 else "I")
    off_size = struct.calcsize(off_fmt)
    if count == 0:
        raise InputError(f"{source}: 2bit file holds no records")
    if count * (2 + off_size) > len(data) - _TWOBIT_HEADER:
        raise InputError(f"{source}: 2bit record count {count} does not fit in the file")
    index = []
    pos = _TWOBIT_HEADER
    for i in range(count):
        if pos >= len(data):
            raise InputError(f"{source}: 2bit index is truncated at entry {i + 1}")
        name_len = data[pos]
        raw = bytes(data[pos + 1 : pos + 1 + name_len])
        if name_len == 0 or len(raw) != name_len:
            raise InputError(f"{source}: 2bit index entry {i + 1} has an empty or truncated name")
        (offset,) = struct.unpack_from(off_fmt, data, pos + 1 + name_len)
        pos += 1 + name_len + off_size
        index.append((_twobit_name(raw, i, source), offset))
    return index


def _twobit_name(raw: bytes, i: int, source: str) -> str:
    try:
        name = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{source}: 2bit index entry {i + 1}: name is not valid UTF-8") from exc
    problem = name_problem(name)
    if problem:
        raise InputError(f"{source}: 2bit index entry {i + 1}: record name {ascii(name)} "
                         f"{problem}")
    return name


def _twobit_record(
    data: bytes, arr: np.ndarray, order: str, name: str, off: int, source: str
) -> Record:
    where = f"{source}: 2bit record {name!r}"
    if off < _TWOBIT_HEADER or off + 8 > len(data):
        raise InputError(f"{where}: offset {off} is outside the file")
    size, n_count = struct.unpack_from(order + "II", data, off)
    n_starts, n_sizes, pos = _twobit_blocks(arr, order, off + 8, n_count, size, where, "N")
    (m_count,) = struct.unpack_from(order + "I", data, pos)
    m_starts, m_sizes, pos = _twobit_blocks(arr, order, pos + 4, m_count, size, where, "mask")
    pos += 4  # reserved word
    packed_len = (size + 3) // 4
    if pos + packed_len > len(data):
        raise InputError(f"{where}: {size} bases run past the end of the file")
    seq = _TWOBIT_LUT[arr[pos : pos + packed_len]].view(np.uint8)[:size]
    if jit.numpy_first(int(n_sizes.sum()) + int(m_sizes.sum()), SMALL_BLOCK_BASES):
        seq[block_positions(n_starts, n_sizes)] = 78
        seq[block_positions(m_starts, m_sizes)] |= 0x20
    else:
        _set_n(seq, n_starts, n_sizes)
        _set_lower(seq, m_starts, m_sizes)
    return Record(name, seq)


SMALL_BLOCK_BASES = 1 << 22  # N and mask bases set through index arrays (8 bytes each) below


def block_positions(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Every position of the blocks (start, size), block after block: arange(start, start +
    size) of each, concatenated (2bit N and mask blocks, the numpy segments writer's names)."""
    ends = np.cumsum(sizes)
    return np.arange(int(ends[-1]) if len(ends) else 0) + np.repeat(starts - ends + sizes, sizes)


def _twobit_blocks(
    arr: np.ndarray, order: str, pos: int, count: int, size: int, where: str, kind: str
) -> tuple[np.ndarray, np.ndarray, int]:
    """Read `count` block starts then `count` sizes at `pos`; check they lie inside the record."""
    if count == 0:
        return _NO_BLOCKS, _NO_BLOCKS, pos
    end = pos + 8 * count
    if end > len(arr):
        raise InputError(f"{where}: {kind} block count {count} runs past the end of the file")
    words = arr[pos:end].view(order + "u4").astype(np.int64)
    starts, sizes = words[:count], words[count:]
    if int((starts + sizes).max()) > size:
        raise InputError(f"{where}: a {kind} block runs past the record's {size} bases")
    return starts, sizes, end


@njit
def _set_n(seq, starts, sizes):
    """N blocks: every base 'N' (hg38 has millions of blocks: a loop, not index arrays)."""
    for b in range(len(starts)):
        seq[starts[b]:starts[b] + sizes[b]] = 78


@njit
def _set_lower(seq, starts, sizes):
    """Mask blocks: every base lowercase."""
    for b in range(len(starts)):
        for i in range(starts[b], starts[b] + sizes[b]):
            seq[i] |= 0x20


# --------------------------------------------------------------------------------------------
# Writing and digests
# --------------------------------------------------------------------------------------------


def _write_atomic(path: PathLike, chunks: Iterable[bytes | np.ndarray]) -> None:
    """Write to a temporary sibling, rename when complete: nothing half-written looks done."""
    from hspz.core import durable

    def write(fh) -> None:
        for chunk in chunks:
            fh.write(chunk)

    durable.write_file(path, write)


def write_fasta(path: PathLike, records: Iterable[Record], width: int = 60) -> None:
    """Write FASTA, `width` bases per line (0: one line per record)."""
    records = list(records)
    for rec in records:
        if not rec.name or name_problem(rec.name):
            raise InputError(f"{os.fspath(path)}: FASTA cannot hold record name {rec.name!r}")
    _write_atomic(path, (chunk for rec in records for chunk in _fasta_chunks(rec, width)))


def _fasta_chunks(rec: Record, width: int) -> Iterable[bytes | np.ndarray]:
    yield b">" + rec.name.encode("utf-8") + b"\n"
    seq = rec.seq
    if len(seq) == 0:
        return
    if width <= 0 or width >= len(seq):
        yield seq.tobytes() + b"\n"
        return
    full = len(seq) // width
    lines = np.full((full, width + 1), _NEWLINE, dtype=np.uint8)
    lines[:, :width] = seq[: full * width].reshape(full, width)
    yield lines
    if len(seq) > full * width:
        yield seq[full * width :].tobytes() + b"\n"


def _runs(flags: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and sizes of the runs of True in a boolean array."""
    if not flags.any():
        return _NO_BLOCKS, _NO_BLOCKS
    padded = np.zeros(len(flags) + 2, dtype=np.int8)
    padded[1:-1] = flags
    edges = padded[1:] - padded[:-1]
    starts = np.flatnonzero(edges == 1)
    return starts, np.flatnonzero(edges == -1) - starts


def _twobit_code_table() -> np.ndarray:
    """2bit code of each byte; 255 marks a byte 2bit cannot hold."""
    table = np.full(256, 255, dtype=np.uint8)
    for code, base in enumerate(_TWOBIT_BASES):
        table[base] = table[base | 0x20] = code
    table[ord("N")] = table[ord("n")] = 0  # UCSC stores N as T under an N block
    return table


_TWOBIT_CODE = _twobit_code_table()


def write_2bit(
    path: PathLike, records: Iterable[Record], byteorder: str = "<", version: int = 0
) -> None:
    """Write UCSC 2bit ('<' little or '>' big endian; version 0: 32-bit offsets, 1: 64-bit).
    Lowercase becomes mask blocks, N/n becomes N blocks; any other non-ACGT byte is refused."""
    if byteorder not in ("<", ">") or version not in (0, 1):
        raise ValueError("byteorder must be '<' or '>' and version 0 or 1")
    records = list(records)
    names = [_twobit_name_bytes(rec, path) for rec in records]
    bodies = [_twobit_body(rec, byteorder, path) for rec in records]
    off_fmt = byteorder + ("Q" if version == 1 else "I")
    offset = _TWOBIT_HEADER + sum(1 + len(n) + struct.calcsize(off_fmt) for n in names)
    index = []
    for name, body in zip(names, bodies, strict=True):
        if version == 0 and offset > 0xFFFFFFFF:
            raise InputError(f"{os.fspath(path)}: too large for 2bit version 0; use version 1")
        index.append(bytes([len(name)]) + name + struct.pack(off_fmt, offset))
        offset += sum(len(part) for part in body)
    header = struct.pack(byteorder + "IIII", TWOBIT_SIGNATURE, version, len(records), 0)
    _write_atomic(path, [header, *index, *(part for body in bodies for part in body)])


def _twobit_name_bytes(rec: Record, path: PathLike) -> bytes:
    name = rec.name.encode("utf-8")
    if not 0 < len(name) < 256:
        raise InputError(f"{os.fspath(path)}: 2bit cannot hold record name {rec.name!r}")
    return name


def _twobit_body(rec: Record, order: str, path: PathLike) -> list[bytes]:
    seq = rec.seq
    if len(seq) >= MAX_BIN_BP:
        raise InputError(f"{os.fspath(path)}: record {rec.name!r} is too long for 2bit")
    codes = _TWOBIT_CODE[seq]
    bad = np.flatnonzero(codes == 255)
    if bad.size:
        pos = int(bad[0])
        raise InputError(
            f"{os.fspath(path)}: record {rec.name!r} has byte {bytes([seq[pos]])!r} at {pos}, "
            "which 2bit cannot hold (only ACGTN, any case)"
        )
    n_starts, n_sizes = _runs((seq | 0x20) == ord("n"))
    m_starts, m_sizes = _runs(seq >= ord("a"))
    u4 = order + "u4"
    padded = np.zeros(-(-len(seq) // 4) * 4, dtype=np.uint8)
    padded[: len(seq)] = codes
    quads = padded.reshape(-1, 4)
    packed = (quads[:, 0] << 6) | (quads[:, 1] << 4) | (quads[:, 2] << 2) | quads[:, 3]
    return [
        struct.pack(order + "II", len(seq), len(n_starts)),
        n_starts.astype(u4).tobytes() + n_sizes.astype(u4).tobytes(),
        struct.pack(order + "I", len(m_starts)),
        m_starts.astype(u4).tobytes() + m_sizes.astype(u4).tobytes(),
        struct.pack(order + "I", 0),
        packed.astype(np.uint8).tobytes(),
    ]


@dataclass(frozen=True)
class KnownRecord:
    """A record known by its name and length alone (an index's reference, read from its
    MANIFEST): planning and the record tables need no more."""

    name: str
    length: int

    def __len__(self) -> int:
        return self.length


class HashedRecords(list):
    """Records with their `sequence.records_digest`, computed once (a batch plans every job
    against one reference)."""

    def __init__(self, records, digest: str | None = None):
        super().__init__(records)
        self.digest = records_digest(self) if digest is None else digest


class KnownRecords(HashedRecords):
    """KnownRecords with the records hash they were recorded with."""

    def __init__(self, names: list[str], lengths: list[int], digest: str):
        super().__init__((KnownRecord(n, k) for n, k in zip(names, lengths, strict=True)),
                         digest)


def side_digest(records) -> str:
    """`sequence.records_digest` of one side's records, or the hash they carry."""
    return records.digest if isinstance(records, HashedRecords) else records_digest(records)


def records_digest(records: Iterable[Record]) -> str:
    """sha256 hex over (name, length, bytes) of every record in order, length-prefixed so that
    no two different record lists share a byte stream."""
    h = hashlib.sha256()
    for rec in records:
        name = rec.name.encode("utf-8")
        h.update(struct.pack("<Q", len(name)) + name + struct.pack("<Q", len(rec.seq)))
        h.update(memoryview(np.ascontiguousarray(rec.seq)))
    return h.hexdigest()


# --------------------------------------------------------------------------------------------
# Packing a bin, reverse complement
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PackedBin:
    """Records of one bin concatenated in input order, each followed by '&'."""

    buf: np.ndarray  # uint8
    block_len: int  # len(buf) - 1: excludes the final '&'
    names: tuple[str, ...]  # prefixed
    starts: np.ndarray  # int64 offset of each record in buf
    lengths: np.ndarray  # int64

    def record_at(self, offsets: np.ndarray) -> np.ndarray:
        """Index of the record containing each offset (an offset on a record's trailing '&'
        belongs to that record; offsets before 0 give -1)."""
        return np.searchsorted(self.starts, np.asarray(offsets), side="right") - 1


def pack_bin(records: Sequence[Record], prefix: str = "") -> PackedBin:
    """Concatenate records (input order), each followed by '&'; names get `prefix`."""
    if len(records) == 0:
        raise ValueError("pack_bin needs at least one record")
    lengths = np.array([len(rec.seq) for rec in records], dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths + 1)[:-1])).astype(np.int64)
    block_len = int(starts[-1] + lengths[-1])
    for rec, n in zip(records, lengths.tolist(), strict=True):
        if n >= MAX_BIN_BP:
            raise InputError(
                f"record {rec.name!r} has {n} bp; records must stay below {MAX_BIN_BP}"
            )
    if block_len >= MAX_BIN_BP:
        raise InputError(
            f"a bin of {block_len} bytes (records + separators) is too large; "
            f"bins must stay below {MAX_BIN_BP} bp"
        )
    buf = np.empty(block_len + 1, dtype=np.uint8)
    for rec, start in zip(records, starts.tolist(), strict=True):
        buf[start : start + len(rec.seq)] = rec.seq
    buf[starts + lengths] = SEPARATOR
    names = tuple(prefix + rec.name for rec in records)
    return PackedBin(buf, block_len, names, starts, lengths)


def _complement_table() -> np.ndarray:
    table = np.full(256, ord("N"), dtype=np.uint8)
    pairs = ("AT", "CG", "RY", "KM", "BV", "DH", "SS", "WW", "NN")
    for a, b in pairs:
        for x, y in ((a, b), (a.lower(), b.lower())):
            table[ord(x)], table[ord(y)] = ord(y), ord(x)
    for src, dst in (("&", "&"), ("X", "N"), ("x", "n"), ("U", "A"), ("u", "a")):
        table[ord(src)] = ord(dst)
    return table


COMPLEMENT = _complement_table()


def reverse_complement(packed: PackedBin) -> PackedBin:
    """The minus strand: reverse complement of buf[:block_len] plus one '&'; the record table
    in reversed order with starts block_len - start - len."""
    n = packed.block_len
    buf = np.empty(n + 1, dtype=np.uint8)
    if jit.numpy_first(n, SMALL_BYTES):
        np.take(COMPLEMENT, packed.buf[:n][::-1], out=buf[:n])
    else:
        _reverse_lookup(packed.buf[:n], COMPLEMENT, buf[:n])
    buf[n] = SEPARATOR
    lengths = packed.lengths[::-1].copy()
    starts = (n - packed.starts - packed.lengths)[::-1].copy()
    return PackedBin(buf, n, packed.names[::-1], starts, lengths)


# --------------------------------------------------------------------------------------------
# The two alphabets
# --------------------------------------------------------------------------------------------

SEED_INVALID = 4
SCORE_L, SCORE_N, SCORE_X, SCORE_E = 4, 5, 6, 7


def _seed_table() -> np.ndarray:
    table = np.full(256, SEED_INVALID, dtype=np.uint8)
    for code, base in enumerate(b"ACGT"):
        table[base] = code
    return table


def _score_table() -> np.ndarray:
    table = np.full(256, SCORE_X, dtype=np.uint8)
    for code, base in enumerate(b"ACGT"):
        table[base] = code
        table[base | 0x20] = SCORE_L
    table[ord("N")] = table[ord("n")] = SCORE_N
    table[SEPARATOR] = SCORE_E
    return table


SEED_TABLE = _seed_table()
SCORE_TABLE = _score_table()


def seed_codes(buf: np.ndarray) -> np.ndarray:
    """Seeding alphabet: uppercase A,C,G,T -> 0..3; every other byte -> 4 (invalidates windows)."""
    return _translated(buf, SEED_TABLE)


def score_codes(buf: np.ndarray) -> np.ndarray:
    """Scoring alphabet: ACGT 0..3, acgt L=4, Nn N=5, '&' E=7, any other byte X=6."""
    return _translated(buf, SCORE_TABLE)


def both_codes(buf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(seed codes, score codes) of buf in one pass."""
    buf = np.ascontiguousarray(buf, dtype=np.uint8)
    if jit.numpy_first(len(buf), SMALL_BYTES):
        return SEED_TABLE[buf], SCORE_TABLE[buf]
    seed, score = np.empty_like(buf), np.empty_like(buf)
    _lookup2(buf, SEED_TABLE, SCORE_TABLE, seed, score)
    return seed, score


def _translated(buf: np.ndarray, table: np.ndarray) -> np.ndarray:
    buf = np.ascontiguousarray(buf, dtype=np.uint8)
    if jit.numpy_first(len(buf), SMALL_BYTES):
        return table[buf]
    out = np.empty_like(buf)
    _lookup(buf, table, out)
    return out


# Table lookups as numba loops: numpy's gather (table[buf]) costs about 3 ns a byte, these
# about 0.6 ns, which is most of preparing an 80 Mbp query (1.17 s -> 0.3 s on the dev machine).
# Below SMALL_BYTES, and while numba is not loaded, numpy gathers (`jit.numpy_first`): loading
# numba costs a process 0.46-0.83 s, more than gathering 64 MB.  Both give the same bytes.
@njit
def _lookup(buf, table, out):
    for i in range(len(buf)):
        out[i] = table[buf[i]]


@njit
def _lookup2(buf, table1, table2, out1, out2):
    for i in range(len(buf)):
        b = buf[i]
        out1[i] = table1[b]
        out2[i] = table2[b]


@njit
def _reverse_lookup(buf, table, out):
    n = len(buf)
    for i in range(n):
        out[n - 1 - i] = table[buf[i]]
