"""`-D/--diagonal-partition`: KegAlign's `diagonal_partition.py`, applied to each segments file
before it is written, so no unsplit file ever exists.

Per run (or job) a history of the line counts of the segments files written so far, in emission
order and including the file at hand, picks the chunk size: files under 5,000 lines stay whole;
with fewer than 2 history entries the chunk is 50,000, else the median (fewer than 7 entries) or
the upper quartile (`statistics.quantiles`, exclusive method) of the history, floored and capped
at 50,000; a file of at most `chunk` lines stays whole.  A split file groups its lines by
(reference name, query name); with more than one pair, pairs of at most `chunk` lines are packed
first-fit in ascending (count, pair) order into aggregates whose pairs follow the query names'
first appearance; every other pair is stably sorted by its diagonal key and cut into `chunk`-line
pieces.  Pieces come first (pairs in first-appearance order, where the script iterates a set),
then aggregates; piece k is `<name>.split<k>.segments`.

Two choices where the script is not exact: sizes are exact line counts (the script estimates
lines as bytes over the first line's length), and large pairs go in first-appearance order.
"""

from __future__ import annotations

import math
import statistics

import numpy as np

MIN_CHUNK_SIZE = 5000
MAX_CHUNK_SIZE = 50000


class Partitioner:
    """The per-run history and the chunk size it implies."""

    def __init__(self) -> None:
        self.history: list[int] = []

    def chunk_for(self, count: int) -> int | None:
        """Observe a file of `count` lines; its chunk size, or None to keep it whole."""
        self.history.append(count)
        if count < MIN_CHUNK_SIZE:
            return None
        chunk = MAX_CHUNK_SIZE
        if len(self.history) >= 2:
            q = statistics.quantiles(self.history, n=4, method="exclusive")
            chunk = min(math.floor(q[1] if len(self.history) < 7 else q[2]), MAX_CHUNK_SIZE)
        return None if count <= chunk else chunk


def split(
    ref_name: np.ndarray,
    qry_name: np.ndarray,
    ref_mid: np.ndarray,
    qry_mid: np.ndarray,
    strand: str,
    chunk: int,
) -> list[np.ndarray]:
    """Index arrays (into the file's lines, in order) of each piece, in `.split` order.

    `ref_name`/`qry_name` are per-line name ids whose order is the names' bytewise order;
    `*_mid` are the midpoints `start + (end - start) // 2` of the printed coordinates.
    """
    pair = ref_name.astype(np.int64) * (int(qry_name.max()) + 1) + qry_name
    keys, first, counts = np.unique(pair, return_index=True, return_counts=True)
    grouped = np.argsort(pair, kind="stable")  # each pair's lines, in file order
    starts = np.cumsum(counts) - counts
    groups = [grouped[a : a + n] for a, n in zip(starts.tolist(), counts.tolist(), strict=True)]
    multi = len(keys) > 1
    pieces: list[np.ndarray] = []
    small = []
    for k in np.argsort(first, kind="stable"):
        members = groups[k]
        if multi and counts[k] <= chunk:
            small.append(k)
            continue
        diag = (
            qry_mid[members] + ref_mid[members]
            if strand == "plus"
            else qry_mid[members] - ref_mid[members]
        )
        ordered = members[np.lexsort((ref_mid[members], diag))]
        pieces += [ordered[i : i + chunk] for i in range(0, len(ordered), chunk)]
    return pieces + _aggregate(small, keys, first, counts, groups, qry_name, chunk)


def _aggregate(
    small: list[int],
    keys: np.ndarray,
    first: np.ndarray,
    counts: np.ndarray,
    groups: list[np.ndarray],
    qry_name: np.ndarray,
    chunk: int,
) -> list[np.ndarray]:
    """First-fit packing of the small pairs, ascending by (count, pair names)."""
    if not small:
        return []
    query_rank = _first_appearance_rank(qry_name)
    bins: list[list[int]] = [[]]
    current = 0
    for k in sorted(small, key=lambda k: (counts[k], keys[k])):
        if current + counts[k] <= chunk:
            current += counts[k]
        else:
            bins.append([])
            current = counts[k]
        bins[-1].append(k)
    out = []
    for group in bins:
        group.sort(key=lambda k: query_rank[qry_name[first[k]]])
        out.append(np.concatenate([groups[k] for k in group]))
    return out


def _first_appearance_rank(ids: np.ndarray) -> dict[int, int]:
    uniq, first = np.unique(ids, return_index=True)
    order = uniq[np.argsort(first, kind="stable")]
    return {int(v): i for i, v in enumerate(order)}


def name_ids(names: tuple[str, ...]) -> np.ndarray:
    """Per record, the rank of its name in bytewise order (equal names share an id)."""
    encoded = [n.encode("utf-8") for n in names]
    order = {n: i for i, n in enumerate(sorted(set(encoded)))}
    return np.array([order[n] for n in encoded], np.int64)
