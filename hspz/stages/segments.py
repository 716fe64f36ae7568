"""The LASTZ segments line, in one place, formatted in bulk.

`ref_name ref_start ref_end query_name query_start query_end strand score`, tab-separated,
1-based inclusive: start = off + 1 - record start, end = off + len + 1 - record start.  Minus-strand
query coordinates count on the reverse complement of the query record.  Lines are written into
one byte buffer, never one Python f-string per HSP: by a numba loop, or, for under SMALL_LINES
lines while numba is not loaded (`hspz.core.jit`: loading it costs more than a small run), by numpy
a field at a time.  Both write the same bytes.
"""

from __future__ import annotations

import numpy as np

from hspz.core import jit
from hspz.core.jit import njit
from hspz.io.packing import PackedBin
from hspz.io.twobit import block_positions

SMALL_LINES = 1 << 20
_POW10 = 10 ** np.arange(1, 19, dtype=np.int64)
# one field of every line: a constant byte, a number column, or (table, offsets, index): text
_Field = int | np.ndarray | tuple[np.ndarray, np.ndarray, np.ndarray]


def _lines(fields: list[_Field], n: int) -> bytes:
    """n lines of `fields` in order, each an int64 array (written in decimal), a byte value, or
    (bytes table, offsets, index array): entry index[i] of the table."""
    widths = [_width(f, n) for f in fields]
    ends = np.cumsum(np.stack(widths), axis=0)
    starts = np.concatenate(([0], np.cumsum(ends[-1])[:-1]))
    out = np.empty(int(ends[-1].sum()), np.uint8)
    for f, w, e in zip(fields, widths, ends, strict=True):
        _put(out, starts + e - w, f, w)
    return out.tobytes()


def _width(field: _Field, n: int) -> np.ndarray:
    if isinstance(field, int):
        return np.ones(n, np.int64)
    if isinstance(field, tuple):
        _, offsets, index = field
        return np.diff(offsets)[index]
    return 1 + np.searchsorted(_POW10, np.abs(field), side="right") + (field < 0)


def _put(out: np.ndarray, at: np.ndarray, field: _Field, width: np.ndarray) -> None:
    if isinstance(field, int):
        out[at] = field
    elif isinstance(field, tuple):
        table, offsets, index = field
        out[block_positions(at, width)] = table[block_positions(offsets[index], width)]
    else:
        negative = field < 0
        out[at[negative]] = 45  # '-'
        digits, value, at = width - negative, np.abs(field), at + negative
        for k in range(int(digits.max())):
            row = np.flatnonzero(digits > k)
            place = 10 ** (digits[row] - 1 - k)
            out[at[row] + k] = 48 + value[row] // place % 10


def _name_table(packed: PackedBin) -> tuple[np.ndarray, np.ndarray]:
    encoded = [n.encode() for n in packed.names]
    offsets = np.zeros(len(encoded) + 1, np.int64)
    offsets[1:] = np.cumsum([len(e) for e in encoded])
    return np.frombuffer(b"".join(encoded) or b"\0", np.uint8), offsets


@njit
def _put_int(out, at, value):
    if value < 0:
        out[at] = 45  # '-'
        at += 1
        value = -value
    digits = 1
    v = value
    while v >= 10:
        v //= 10
        digits += 1
    for k in range(digits - 1, -1, -1):
        out[at + k] = 48 + value % 10
        value //= 10
    return at + digits


@njit
def _put_name(out, at, names, offsets, idx):
    for k in range(offsets[idx], offsets[idx + 1]):
        out[at] = names[k]
        at += 1
    return at


@njit
def _format(rn, ro, ri, r0, r1, qn, qo, qi, q0, q1, strand, score, out):
    at = 0
    for i in range(len(ri)):
        at = _put_name(out, at, rn, ro, ri[i])
        out[at] = 9
        at = _put_int(out, at + 1, r0[i])
        out[at] = 9
        at = _put_int(out, at + 1, r1[i])
        out[at] = 9
        at = _put_name(out, at + 1, qn, qo, qi[i])
        out[at] = 9
        at = _put_int(out, at + 1, q0[i])
        out[at] = 9
        at = _put_int(out, at + 1, q1[i])
        out[at] = 9
        out[at + 1] = strand
        out[at + 2] = 9
        at = _put_int(out, at + 3, score[i])
        out[at] = 10
        at += 1
    return at


def format_lines(h: np.ndarray, ref: PackedBin, qry: PackedBin, strand: str) -> bytes:
    """Segments lines (newline-terminated) for HSP records in the order given."""
    if len(h) == 0:
        return b""
    rs = h["ref_start"].astype(np.int64)
    qs = h["query_start"].astype(np.int64)
    ln = h["len"].astype(np.int64)
    ri = ref.record_at(rs)
    qi = qry.record_at(qs)
    r0 = rs + 1 - ref.starts[ri]
    q0 = qs + 1 - qry.starts[qi]
    rn, ro = _name_table(ref)
    qn, qo = _name_table(qry)
    sign, score = ord("+" if strand == "plus" else "-"), h["score"].astype(np.int64)
    if jit.numpy_first(len(h), SMALL_LINES):
        return _lines(
            [
                (rn, ro, ri),
                9,
                r0,
                9,
                r0 + ln,
                9,
                (qn, qo, qi),
                9,
                q0,
                9,
                q0 + ln,
                9,
                sign,
                9,
                score,
                10,
            ],
            len(h),
        )
    width = 8 + int(np.diff(ro).max()) + int(np.diff(qo).max()) + 5 * 21
    out = np.empty(len(h) * width, np.uint8)
    end = _format(rn, ro, ri, r0, r0 + ln, qn, qo, qi, q0, q0 + ln, sign, score, out)
    return out[:end].tobytes()


@njit
def _format_raw(word, rs, qs, ln, score, out):
    at = 0
    for i in range(len(rs)):
        for c in word:
            out[at] = c
            at += 1
        for value in (rs[i], qs[i], ln[i], score[i]):
            out[at] = 9
            at = _put_int(out, at + 1, value)
        out[at] = 10
        at += 1
    return at


def format_raw(h: np.ndarray, strand: str) -> bytes:
    """`--dump-raw` lines: `strand ref_start query_start len score`, block-relative, 0-based."""
    if len(h) == 0:
        return b""
    word = np.frombuffer(strand.encode(), np.uint8)
    cols = [h[k].astype(np.int64) for k in ("ref_start", "query_start", "len", "score")]
    if jit.numpy_first(len(h), SMALL_LINES):
        fields: list[_Field] = [(word, np.array([0, len(word)]), np.zeros(len(h), np.int64))]
        for col in cols:
            fields += [9, col]
        return _lines(fields + [10], len(h))
    out = np.empty(len(h) * (len(word) + 5 + 4 * 21), np.uint8)
    return out[: _format_raw(word, *cols, out)].tobytes()
