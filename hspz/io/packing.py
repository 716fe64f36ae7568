"""Packing records into bins: a bin's bases joined by separators (`pack_bin`), its record
offsets and the minus strand's flip (`record_offsets`, the one definition the engine's packed bins
and the emitter's base-free record tables both use), the reverse complement of a packed bin, and
the two alphabets (seeding and scoring codes).

Everything works on numpy byte arrays, never on Python strings per base; the rules are
docs/algorithm.md, "Packing a bin".
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from hspz.core import jit
from hspz.core.errors import InputError
from hspz.core.jit import njit
from hspz.io.records import MAX_BIN_BP, SEPARATOR, Record

SMALL_BYTES = 1 << 26  # numpy translates below this while numba is not loaded (`_lookup`)
SPAN_BYTES = 1 << 22  # least bytes a thread copies or translates when `threads` share the work
LOOKUP_ITEMS = 1 << 20  # codes `numpy_lookup` hands numpy at once: an 8 MiB int64 copy of them


def numpy_lookup(table: np.ndarray, codes: np.ndarray, out: np.ndarray) -> None:
    """out[i] = table[codes[i]] (uint8 codes, any views of one length), numpy's way, in pieces
    (`_lookup`, `_lookup2` and `_reverse_lookup` are numba's way, once it is loaded).

    `np.take` first converts its indices to int64: over a whole 30 Mbp bin that is a 240 MB copy
    in fresh pages, and the lookup took 0.20-0.34 s where pieces of LOOKUP_ITEMS take 0.031-0.034
    s (dev machine, a fresh process; BENCHMARKS.md, "Reading inputs").  Pieces much smaller
    than this hand the GIL back and forth with numba's load beside the reads."""
    for lo in range(0, len(codes), LOOKUP_ITEMS):
        hi = lo + LOOKUP_ITEMS
        np.take(table, codes[lo:hi], out=out[lo:hi], mode="clip")  # uint8 codes: in range


def on_threads(
    work: Callable[[int, int], object], n: int, threads: int, least: int | None = None
) -> None:
    """work(lo, hi) over consecutive spans of range(n), one span a thread, on up to `threads`
    threads of at least `least` items each (SPAN_BYTES unless given, read at the call, so a
    test that lowers it splits small inputs; the copies, numpy gathers and numba loops given
    to it release the GIL).  Each span writes its own part of the output: the bytes never
    depend on the thread count."""
    spans = max(1, min(threads, n // (SPAN_BYTES if least is None else least)))
    edges = [n * k // spans for k in range(spans + 1)]
    if spans == 1:
        work(0, n)
        return
    with ThreadPoolExecutor(spans) as pool:
        list(pool.map(work, edges[:-1], edges[1:]))


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


def record_offsets(
    lengths: Sequence[int] | np.ndarray, strand: str = "plus"
) -> tuple[np.ndarray, np.ndarray, int]:
    """(starts, lengths, block_len) of records packed in this order, one '&' after each:
    block_len counts the records and the separators between them.  On the minus strand (the
    reverse complement of the bin) the records come in reverse order, each starting at
    block_len - start - length.  The one definition: packed bins, their reverse complements and
    the emitter's base-free record tables all take their offsets from here."""
    lengths_a = np.array(lengths, dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths_a + 1)[:-1])).astype(np.int64)
    block_len = int(lengths_a.sum() + len(lengths_a) - 1)
    if strand == "minus":
        return (block_len - starts - lengths_a)[::-1].copy(), lengths_a[::-1].copy(), block_len
    return starts, lengths_a, block_len


def pack_bin(records: Sequence[Record], prefix: str = "", threads: int = 1) -> PackedBin:
    """Concatenate records (input order), each followed by '&'; names get `prefix`.  The
    copies run on up to `threads` threads."""
    if len(records) == 0:
        raise ValueError("pack_bin needs at least one record")
    starts, lengths, block_len = record_offsets([len(rec.seq) for rec in records])
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
    firsts, seqs = starts.tolist(), [rec.seq for rec in records]

    def copy(lo: int, hi: int) -> None:  # buf[lo:hi] from the records it overlaps
        r0, r1 = bisect.bisect_right(firsts, lo) - 1, bisect.bisect_left(firsts, hi)
        for r in (r0, r1 - 1) if r1 - r0 > 1 else (r0,):  # the two that may be cut
            first, seq = firsts[r], seqs[r]
            a, b = max(lo, first), min(hi, first + len(seq))
            if a < b:
                buf[a:b] = seq[a - first : b - first]
        for first, seq in zip(firsts[r0 + 1 : r1 - 1], seqs[r0 + 1 : r1 - 1], strict=True):
            buf[first : first + len(seq)] = seq  # whole records (a fragmented assembly's)

    on_threads(copy, block_len, threads)
    buf[starts + lengths] = SEPARATOR
    names = tuple(prefix + rec.name for rec in records)
    return PackedBin(buf, block_len, names, starts, lengths)


def _complement_table() -> np.ndarray:
    table = np.full(256, ord("N"), dtype=np.uint8)
    pairs = ("AT", "CG", "RY", "KM", "BV", "DH", "SS", "WW", "NN")
    for a, b in ((pair[0], pair[1]) for pair in pairs):
        for x, y in ((a, b), (a.lower(), b.lower())):
            table[ord(x)], table[ord(y)] = ord(y), ord(x)
    for src, dst in (("&", "&"), ("X", "N"), ("x", "n"), ("U", "A"), ("u", "a")):
        table[ord(src)] = ord(dst)
    return table


COMPLEMENT = _complement_table()


def reverse_complement(packed: PackedBin, threads: int = 1) -> PackedBin:
    """The minus strand: reverse complement of buf[:block_len] plus one '&'; the record table
    in reversed order with starts block_len - start - len.  On up to `threads` threads."""
    n = packed.block_len
    buf = np.empty(n + 1, dtype=np.uint8)
    src = packed.buf
    numpy = jit.numpy_first(n, SMALL_BYTES)

    def flip(lo: int, hi: int) -> None:  # src[lo:hi] lands, reversed, on buf[n - hi : n - lo]
        if numpy:
            numpy_lookup(COMPLEMENT, src[lo:hi][::-1], buf[n - hi : n - lo])
        else:
            _reverse_lookup(src[lo:hi], COMPLEMENT, buf[n - hi : n - lo])

    on_threads(flip, n, threads)
    buf[n] = SEPARATOR
    starts, lengths, _ = record_offsets(packed.lengths, "minus")
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


def seed_codes(buf: np.ndarray, threads: int = 1) -> np.ndarray:
    """Seeding alphabet: uppercase A,C,G,T -> 0..3; every other byte -> 4 (invalidates windows)."""
    return _translated(buf, (SEED_TABLE,), threads)[0]


def score_codes(buf: np.ndarray, threads: int = 1) -> np.ndarray:
    """Scoring alphabet: ACGT 0..3, acgt L=4, Nn N=5, '&' E=7, any other byte X=6."""
    return _translated(buf, (SCORE_TABLE,), threads)[0]


def both_codes(buf: np.ndarray, threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(seed codes, score codes) of buf in one pass, on up to `threads` threads."""
    seed, score = _translated(buf, (SEED_TABLE, SCORE_TABLE), threads)
    return seed, score


def _translated(
    buf: np.ndarray, tables: tuple[np.ndarray, ...], threads: int = 1
) -> list[np.ndarray]:
    """buf looked up in one table or two (one pass over buf), in spans on `threads` threads."""
    buf = np.ascontiguousarray(buf, dtype=np.uint8)
    outs = [np.empty_like(buf) for _ in tables]
    numpy = jit.numpy_first(len(buf), SMALL_BYTES)

    def span(lo: int, hi: int) -> None:
        if numpy:
            for table, out in zip(tables, outs, strict=True):
                numpy_lookup(table, buf[lo:hi], out[lo:hi])
        elif len(tables) == 1:
            _lookup(buf[lo:hi], tables[0], outs[0][lo:hi])
        else:
            _lookup2(buf[lo:hi], *tables, *(out[lo:hi] for out in outs))

    on_threads(span, len(buf), threads)
    return outs


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


def table_from(names: list[str], lengths: list[int], prefix: str, strand: str) -> PackedBin:
    """Names and offsets of a bin without its bases: what the emitter needs (the same table as
    `pack_bin`'s, or `reverse_complement`'s on the minus strand)."""
    starts, lengths_a, block_len = record_offsets(lengths, strand)
    prefixed = tuple(prefix + n for n in names)
    if strand == "minus":
        prefixed = prefixed[::-1]
    return PackedBin(np.empty(0, np.uint8), block_len, prefixed, starts, lengths_a)
