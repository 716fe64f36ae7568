"""FASTA (plain text, already decompressed): parsing with a few whole-file numpy passes (headers,
line ends, the nucleotide check) and writing records back as FASTA."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable

import numpy as np

from hspz.core.errors import InputError
from hspz.core.names import name_problem
from hspz.io.records import PathLike, Record, refuse_duplicates, write_atomic

_WHITESPACE = b" \t\n\r\v\f"
_NOT_WHITESPACE = np.ones(256, np.bool_)
_NOT_WHITESPACE[np.frombuffer(_WHITESPACE, np.uint8)] = False


_NEWLINE = ord("\n")


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


MASK_PIECE = 1 << 20  # bytes whose low ones `_sequence_mask` refines at once


def _sequence_mask(arr: np.ndarray, heads: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """True for the bytes that are sequence: not whitespace, not a header line, not before
    the first header.  Every whitespace byte is <= ' ', so only those low bytes are looked
    up, a piece at a time: their offsets (8 bytes each) are about 1/60 of a FASTA's bytes,
    but all of a damaged file's (NUL bytes: a file of 2 GB needed 24 GB at once)."""
    keep = arr > ord(" ")
    for at in range(0, len(arr), MASK_PIECE):
        low = np.flatnonzero(~keep[at : at + MASK_PIECE]) + at
        keep[low] = _NOT_WHITESPACE[arr[low]]
    keep[: heads[0]] = False
    keep[_ranges_index(heads, ends)] = False
    return keep


def _ranges_index(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """All offsets of the half-open ranges [starts[i], ends[i]), concatenated (vectorised)."""
    sizes = ends - starts
    firsts = np.cumsum(sizes) - sizes
    return np.arange(int(sizes.sum()), dtype=np.int64) + np.repeat(starts - firsts, sizes)


def write_fasta(path: PathLike, records: Iterable[Record], width: int = 60) -> None:
    """Write FASTA, `width` bases per line (0: one line per record)."""
    records = list(records)
    for rec in records:
        if not rec.name or name_problem(rec.name):
            raise InputError(f"{os.fspath(path)}: FASTA cannot hold record name {rec.name!r}")
    write_atomic(path, (chunk for rec in records for chunk in _fasta_chunks(rec, width)))


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
