"""Segments lines (hspz/stages/segments.py) against Python f-strings (docs/outputs.md, "Segments
files"; docs/algorithm.md, "From HSPs to lines").

The record a coordinate belongs to and its start are recomputed here from the record lengths
(plus strand: records in input order; minus strand: the reverse-complement table, records in
reversed order starting at `block_len - start - len`).
"""

from __future__ import annotations

import numpy as np
import pytest

from hspz.io.packing import PackedBin, pack_bin, reverse_complement
from hspz.io.records import Record
from hspz.stages.hsp import HSP_DTYPE
from hspz.stages.segments import format_lines


def _table(lengths: list[int], strand: str) -> list[tuple[int, int, int]]:
    """(record index in input order, start, length) as laid out on this strand."""
    starts, at = [], 0
    for n in lengths:
        starts.append(at)
        at += n + 1
    block_len = at - 1
    rows = [(i, s, n) for i, (s, n) in enumerate(zip(starts, lengths, strict=True))]
    if strand == "plus":
        return rows
    return [(i, block_len - s - n, n) for i, s, n in reversed(rows)]


def _owner(table, off: int):
    for i, start, n in table:
        if start <= off <= start + n:  # the trailing '&' belongs to the record
            return i, start
    raise AssertionError(off)


def _random_hsps(rng, table, count: int) -> np.ndarray:
    h = np.zeros(count, HSP_DTYPE)
    for k in range(count):
        _, start, n = table[int(rng.integers(0, len(table)))]
        ln = int(rng.integers(0, min(n, 5000)))
        h[k]["ref_start"] = start + int(rng.integers(0, n - ln))
        h[k]["len"] = ln
    return h


def _expected(h, rnames, rtable, qnames, qtable, strand: str) -> bytes:
    out = []
    for rs, qs, ln, score in zip(
        h["ref_start"].tolist(),
        h["query_start"].tolist(),
        h["len"].tolist(),
        h["score"].tolist(),
        strict=True,
    ):
        ri, r0 = _owner(rtable, rs)
        qi, q0 = _owner(qtable, qs)
        out.append(
            f"{rnames[ri]}\t{rs + 1 - r0}\t{rs + ln + 1 - r0}\t{qnames[qi]}\t"
            f"{qs + 1 - q0}\t{qs + ln + 1 - q0}\t{'+' if strand == 'plus' else '-'}\t"
            f"{score}\n"
        )
    return "".join(out).encode()


def _records(rng, prefix: str, lengths) -> list[Record]:
    return [
        Record(f"{prefix}{i}_{'x' * i}", rng.choice(list(b"ACGTacgtN"), n).astype(np.uint8))
        for i, n in enumerate(lengths)
    ]


@pytest.mark.parametrize("strand", ["plus", "minus"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lines_equal_f_strings_with_1_based_inclusive_record_coordinates(seed, strand):
    rng = np.random.default_rng(seed)
    rlen = [int(n) for n in rng.integers(1, 3000, 4)] + [1]
    qlen = [int(n) for n in rng.integers(1, 3000, 3)]
    ref = pack_bin(_records(rng, "chr", rlen), prefix="T.")
    qpacked = pack_bin(_records(rng, "ctg", qlen), prefix="Q.")
    qry = qpacked if strand == "plus" else reverse_complement(qpacked)
    rtable, qtable = _table(rlen, "plus"), _table(qlen, strand)
    h = _random_hsps(rng, rtable, 400)
    q = _random_hsps(rng, qtable, 400)
    h["query_start"] = q["ref_start"]
    h["len"] = np.minimum(h["len"], q["len"])
    h["score"] = rng.integers(3000, 10**6, 400)
    h[:3]["len"] = 0  # zero-length HSPs: start == end
    got = format_lines(h, ref, qry, strand)
    rnames = [f"T.chr{i}_{'x' * i}" for i in range(len(rlen))]
    qnames = [f"Q.ctg{i}_{'x' * i}" for i in range(len(qlen))]
    assert got == _expected(h, rnames, rtable, qnames, qtable, strand)
    for line in got.decode().splitlines():
        fields = line.split("\t")
        assert len(fields) == 8
        assert all(int(fields[k]) >= 1 for k in (1, 2, 4, 5))


def test_minus_query_coordinates_count_on_the_reverse_complement_of_the_record():
    qpacked = pack_bin([Record("a", b"ACGTACGTAC"), Record("b", b"GGGCCCAAATTT")])
    rc = reverse_complement(qpacked)  # "AAATTTGGGCCC&GTACGTACGT", b first
    ref = pack_bin([Record("r", b"A" * 50)])
    h = np.zeros(2, HSP_DTYPE)
    h[0] = (5, 0, 3, 3000)  # rc offset 0 = b's first base on the minus strand
    h[1] = (5, 13, 9, 3001)  # rc offset 13 = a's first base on the minus strand (a's rc: whole)
    got = format_lines(h, ref, rc, "minus").decode().splitlines()
    assert got == ["r\t6\t9\tb\t1\t4\t-\t3000", "r\t6\t15\ta\t1\t10\t-\t3001"]


def test_an_empty_hsp_list_gives_no_bytes():
    p = pack_bin([Record("r", b"ACGT")])
    assert format_lines(np.zeros(0, HSP_DTYPE), p, p, "plus") == b""


@pytest.mark.parametrize("numba", [False, True])
def test_coordinates_beyond_2_to_the_31_print_exactly(monkeypatch, numba):
    """Both writers (numpy's while numba is not loaded, numba's loop once it is), whatever
    loaded numba earlier in the session."""
    from hspz.core import jit

    monkeypatch.setattr(jit, "loaded", lambda: numba)
    # bins near the u32 limit, described by their record tables (format_lines reads only them)
    lengths = [2**31 + 5, 3, 2**31 - 100]
    starts = np.array([0, lengths[0] + 1, lengths[0] + lengths[1] + 2], np.int64)
    block_len = int(starts[-1] + lengths[-1])
    assert block_len < 2**32
    big = PackedBin(
        np.zeros(1, np.uint8),
        block_len,
        ("huge", "tiny", "big"),
        starts,
        np.array(lengths, np.int64),
    )
    h = np.zeros(4, HSP_DTYPE)
    h[0] = (2**31 + 4, 2**31 - 1, 0, 2**31 - 1)
    h[1] = (int(starts[2]) + 2**31 - 150, int(starts[2]), 49, 4000)
    h[2] = (int(starts[1]) + 1, 0, 2, 3000)
    h[3] = (2**32 - 1 - 2**31, int(starts[2]) + 5, 7, 3000)
    rtable = [(i, int(s), n) for i, (s, n) in enumerate(zip(starts, lengths, strict=True))]
    expected = _expected(h, big.names, rtable, big.names, rtable, "plus")
    assert format_lines(h, big, big, "plus") == expected
    assert b"\t4294967295\t" not in expected and b"-" not in expected.replace(b"\t+\t", b"")
    first = expected.decode().splitlines()[0].split("\t")
    assert first[1:3] == [str(2**31 + 5), str(2**31 + 5)] and first[4] == str(2**31)


def test_format_raw_writes_the_dump_raw_columns_like_python_formatting():
    from hspz.stages.hsp import HSP_DTYPE
    from hspz.stages.segments import format_raw

    rng = np.random.default_rng(4)
    h = np.zeros(500, HSP_DTYPE)
    h["ref_start"] = rng.integers(0, 2**32 - 1, 500)
    h["query_start"] = rng.integers(0, 2**31, 500)
    h["len"] = rng.integers(0, 10**6, 500)
    h["score"] = rng.integers(3000, 2**31 - 1, 500)
    want = "".join(
        f"minus\t{a}\t{b}\t{c}\t{d}\n"
        for a, b, c, d in zip(
            *(h[k].tolist() for k in ("ref_start", "query_start", "len", "score")), strict=True
        )
    )
    assert format_raw(h, "minus") == want.encode()
    assert format_raw(h[:0], "plus") == b""
