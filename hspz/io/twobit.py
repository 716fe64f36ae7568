"""UCSC 2bit (kent twoBit.c layout): decoding with one 256-entry lookup, N and mask blocks, and
writing records as 2bit."""

from __future__ import annotations

import functools
import os
import struct
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from hspz.core import jit
from hspz.core.errors import InputError
from hspz.core.jit import njit
from hspz.core.names import name_problem
from hspz.io.packing import SPAN_BYTES, numpy_lookup, on_threads
from hspz.io.records import MAX_BIN_BP, PathLike, Record, refuse_duplicates, write_atomic

TWOBIT_MAGIC = {b"\x1a\x41\x27\x43": ">", b"\x43\x27\x41\x1a": "<"}  # byte order of the file
TWOBIT_SIGNATURE = 0x1A412743


_TWOBIT_BASES = b"TCAG"  # 2bit codes 0..3


_TWOBIT_HEADER = 16


_NO_BLOCKS = np.zeros(0, dtype=np.int64)


def _twobit_lut() -> np.ndarray:
    """uint32 per packed byte whose 4 memory bytes are its 4 bases, first base in the high bits."""
    codes = np.arange(256, dtype=np.uint8)
    shifts = np.array([6, 4, 2, 0], dtype=np.uint8)
    bases = np.frombuffer(_TWOBIT_BASES, dtype=np.uint8)
    quads = np.ascontiguousarray(bases[(codes[:, None] >> shifts) & 3])
    return quads.view(np.uint32).reshape(256)


_TWOBIT_LUT = _twobit_lut()


# Smaller 2bit files unpack on the calling thread, a record at a time: while numba is not loaded
# a record's N and mask blocks take index arrays of 8 bytes a base, and four records unpacked at
# once raised the peak of issue 24's 30 x 6 Mbp run at -t 1 by up to 120 MiB (H200 machine).
_THREADED_BYTES = 1 << 24


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


def _twobit_records(
    data: bytes, order: str, index: list[tuple[str, int]], source: str
) -> list[Record]:
    arr = np.frombuffer(data, dtype=np.uint8)
    unpack = functools.partial(_twobit_record, data, arr, order, source=source)
    if len(index) == 1 or len(data) < _THREADED_BYTES:
        spans = (os.cpu_count() or 1) if len(data) >= _THREADED_BYTES else 1
        return [unpack(name, off, spans=spans) for name, off in index]
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
        raise InputError(f"{source}: 2bit index entry {i + 1}: record name {ascii(name)} {problem}")
    return name


def _twobit_record(
    data: bytes, arr: np.ndarray, order: str, name: str, off: int, source: str, spans: int = 1
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
    quads = np.empty(packed_len, dtype=np.uint32)  # 4 bases a packed byte, on `spans` threads
    packed = arr[pos : pos + packed_len]
    on_threads(
        lambda lo, hi: numpy_lookup(_TWOBIT_LUT, packed[lo:hi], quads[lo:hi]),
        packed_len,
        spans,
        SPAN_BYTES // 4,
    )
    seq = quads.view(np.uint8)[:size]
    if jit.numpy_first(int(n_sizes.sum()) + int(m_sizes.sum()), SMALL_BLOCK_BASES):
        _mark_blocks(seq, n_starts, n_sizes, m_starts, m_sizes)
    else:
        _set_n(seq, n_starts, n_sizes)
        _set_lower(seq, m_starts, m_sizes)
    # 2bit holds T, C, A and G alone: a base is seedable unless an N or a mask block covers it
    blocks = (np.concatenate((n_starts, m_starts)), np.concatenate((n_sizes, m_sizes)))
    return Record(name, seq, blocks)


SMALL_BLOCK_BASES = 1 << 22  # N and mask bases set by numpy (`_mark_blocks`) below


def _mark_blocks(
    seq: np.ndarray,
    n_starts: np.ndarray,
    n_sizes: np.ndarray,
    m_starts: np.ndarray,
    m_sizes: np.ndarray,
) -> None:
    """numpy's path for `_set_n` then `_set_lower`: every N block 'N', then every mask block
    lowercase."""
    if (n := _covered(n_starts, n_sizes, len(seq))) is not None:
        np.copyto(seq, np.uint8(78), where=n)
    if (m := _covered(m_starts, m_sizes, len(seq))) is not None:
        np.bitwise_or(seq, 0x20, out=seq, where=m)


def _covered(starts: np.ndarray, sizes: np.ndarray, length: int) -> np.ndarray | None:
    """Whether any of these blocks covers each base, one bool a base, from the runs between
    them (None where no block covers one); blocks out of order or overlapping are first merged
    into their union.  Blocks of size 0 cover nothing and are dropped first: the path is taken
    while the blocks' bases are few (`SMALL_BLOCK_BASES`), however many blocks there are, and
    5 million of them, shuffled, took 2.9 s and 300 MiB to sort and merge (numba's loops, loaded,
    0.2 s)."""
    if not sizes.all():
        keep = sizes > 0
        starts, sizes = starts[keep], sizes[keep]
    if not len(starts):
        return None
    ends = starts + sizes
    if (starts[1:] < ends[:-1]).any():
        starts, ends = _union(starts, ends)
    runs = np.empty(2 * len(starts) + 1, np.int64)  # gap, block, gap, block, ..., tail
    runs[0] = starts[0]
    runs[2:-1:2] = starts[1:] - ends[:-1]
    runs[1::2] = ends - starts
    runs[-1] = length - ends[-1]
    marks = np.zeros(len(runs), bool)  # a bool a run, not the int64 of arange(...) % 2
    marks[1::2] = True
    return np.repeat(marks, runs)


def _union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The blocks [start, end), none empty, merged where they overlap, in order: (starts, ends).
    Blocks of one start merge whatever their order, so the sort need not be stable."""
    order = np.argsort(starts)
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)  # the furthest end so far
    first = np.concatenate(([True], starts[1:] >= reach[:-1]))
    last = np.concatenate((first[1:], [True]))
    return starts[first], reach[last]


def block_positions(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Every position of the blocks (start, size), block after block: arange(start, start +
    size) of each, concatenated (the numpy segments writer's names)."""
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
        seq[starts[b] : starts[b] + sizes[b]] = 78


@njit
def _set_lower(seq, starts, sizes):
    """Mask blocks: every base lowercase."""
    for b in range(len(starts)):
        for i in range(starts[b], starts[b] + sizes[b]):
            seq[i] |= 0x20


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
    write_atomic(path, [header, *index, *(part for body in bodies for part in body)])


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
