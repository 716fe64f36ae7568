"""`-D`: the diagonal partition matches a line-by-line port of KegAlign's diagonal_partition.py
(its chunk estimate and its split), on synthetic segments files."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from hspz.io.packing import table_from
from hspz.run.emit import split_file
from hspz.stages import partition
from hspz.stages.hsp import HSP_DTYPE
from hspz.stages.segments import format_lines


def script_chunk(history: list[int], count: int) -> int | None:
    """diagonal_partition.py's `chunk_size < 0` branch, sizes in lines (None: keep whole)."""
    if count < 5000:
        return None
    if len(history) < 2:
        chunk = 50000
    else:
        q = statistics.quantiles(history)
        chunk = min(int((q[1] if len(history) < 7 else q[-1]) // 1), 50000)
    return None if count <= chunk else chunk


def script_split(lines: list[str], strand: str, chunk: int) -> list[list[str]]:
    """The script's split of one file's lines (large pairs in first-appearance order)."""
    data: dict[tuple[str, str], list[tuple[int, int, str]]] = {}
    for line in lines:
        n1, s1, e1, n2, s2, e2, _, _ = line.split()
        half = (int(e1) - int(s1)) // 2
        data.setdefault((n1, n2), []).append((int(s1) + half, int(s2) + half, line))
    query_order = list(dict.fromkeys(p[1] for p in data))
    skip = [p for p in data if len(data[p]) <= chunk] if len(data) > 1 else []
    sign = 1 if strand == "plus" else -1
    out = []
    for pair in data:
        if pair in skip:
            continue
        ordered = sorted(data[pair], key=lambda c: (c[1] + sign * c[0], c[0]))
        out += [[c[2] for c in ordered[i : i + chunk]] for i in range(0, len(ordered), chunk)]
    if skip:
        groups: list[list[tuple[str, str]]] = [[]]
        current = 0
        for count, pair in sorted((len(data[p]), p) for p in skip):
            if current + count <= chunk:
                current += count
            else:
                groups.append([])
                current = count
            groups[-1].append(pair)
        rank = {q: i for i, q in enumerate(query_order)}
        for group in groups:
            out.append([c[2] for p in sorted(group, key=lambda p: rank[p[1]]) for c in data[p]])
    return out


def test_chunk_size_follows_the_scripts_estimate_over_a_history():
    rng = np.random.default_rng(1)
    ours = partition.Partitioner()
    history: list[int] = []
    for count in rng.integers(1, 60000, 40).tolist() + [4999, 5000, 50000, 50001]:
        history.append(count)
        assert ours.chunk_for(count) == script_chunk(history, count), history


def test_small_files_stay_whole_and_a_first_file_is_cut_at_50000_lines():
    assert partition.Partitioner().chunk_for(4999) is None
    assert partition.Partitioner().chunk_for(50000) is None
    assert partition.Partitioner().chunk_for(50001) == 50000
    p = partition.Partitioner()
    p.chunk_for(100)
    assert p.chunk_for(6000) == 3050  # median of [100, 6000]


def _file(rng, n: int, pairs: list[tuple[int, int]], names: int) -> np.ndarray:
    """HSP rows on the given (ref record, query record) pairs of 1 kbp records."""
    which = rng.integers(0, len(pairs), n)
    rec = np.array(pairs)[which]
    h = np.empty(n, HSP_DTYPE)
    h["ref_start"] = rec[:, 0] * 1001 + rng.integers(0, 900, n)
    h["query_start"] = rec[:, 1] * 1001 + rng.integers(0, 900, n)
    h["len"] = rng.integers(1, 99, n)
    h["score"] = rng.integers(100, 5000, n)
    return h


@pytest.mark.parametrize("strand", ["plus", "minus"])
@pytest.mark.parametrize(
    "pairs, chunk",
    [
        ([(0, 0)], 700),  # one pair: always split when over the chunk
        ([(0, 0), (1, 1), (2, 1), (0, 2), (3, 0)], 500),  # large and small pairs
        ([(1, 2), (0, 0), (2, 1), (3, 3), (0, 1), (2, 2)], 1200),  # only small pairs: aggregated
    ],
)
def test_split_matches_the_script(strand, pairs, chunk):
    rng = np.random.default_rng(len(pairs) + chunk)
    names = ["chrB", "chrA", "chr10", "chr2"]  # input order is not name order
    ref = table_from(names, [1000] * 4, "", "plus")
    qry = table_from(["q2", "q1", "q0", "q3"], [1000] * 4, "", strand)
    h = _file(rng, 2400, pairs, 4)
    lines = format_lines(h, ref, qry, strand).decode().splitlines(keepends=True)
    ours = ["".join(lines[i] for i in idx) for idx in split_file(h, ref, qry, strand, chunk)]
    theirs = ["".join(piece) for piece in script_split(lines, strand, chunk)]
    assert ours == theirs
    assert sorted("".join(ours).splitlines()) == sorted("".join(lines).splitlines())


def test_equal_names_are_one_pair_as_in_the_script():
    ids = partition.name_ids(("b", "a", "b", "c"))
    assert ids.tolist() == [1, 0, 1, 2]
