"""Bins and the plan: a bin is a tuple of record indices in input order (balanced, or KegAlign's
greedy packing with --kegalign-bins); a work unit is one (reference bin, query bin) pair with
the dense ordinal r * Q + q; the worker count a plan allows."""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

MAX_BIN_BP = 4_294_967_295


DEFAULT_BLOCK = 500_000_000


Bins = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class WorkUnit:
    ordinal: int
    ref_bin: int
    query_bin: int


@dataclass(frozen=True)
class Plan:
    """The frozen grid: which records form each bin, and the units over them."""

    ref_bins: Bins
    query_bins: Bins

    @property
    def units(self) -> list[WorkUnit]:
        nq = len(self.query_bins)
        return [WorkUnit(r * nq + q, r, q) for r in range(len(self.ref_bins)) for q in range(nq)]


def bin_bp(bins: Bins, lengths: Sequence[int]) -> list[int]:
    """Total record length of every bin (separators excluded)."""
    return [sum(lengths[i] for i in b) for b in bins]


def layout_n_bins(total_bp: int, target: int, n_records: int) -> int:
    """`clamp(ceil(total / target), 1, n_records)`: the balanced planner's bin count."""
    if n_records == 0:
        return 0
    return min(max(math.ceil(total_bp / max(target, 1)), 1), n_records)


def balanced_bins_n(lengths: Sequence[int], n_bins: int) -> Bins:
    """Longest records first into the currently lightest of `n_bins` bins (ties: input order,
    lowest bin); records back in input order; bins ordered by their first record."""
    n = len(lengths)
    if n == 0:
        return ()
    n_bins = min(max(n_bins, 1), n)
    order = sorted(range(n), key=lambda i: (-lengths[i], i))
    heap = [(0, b) for b in range(n_bins)]
    members: list[list[int]] = [[] for _ in range(n_bins)]
    for i in order:
        load, b = heapq.heappop(heap)
        members[b].append(i)
        heapq.heappush(heap, (load + lengths[i], b))
    bins = [tuple(sorted(m)) for m in members if m]
    return tuple(sorted(bins, key=lambda b: b[0]))


def balanced_bins(lengths: Sequence[int], target: int) -> Bins:
    """The default planner: `layout_n_bins` bins, filled by `balanced_bins_n`."""
    return balanced_bins_n(lengths, layout_n_bins(sum(lengths), target, len(lengths)))


def kegalign_bins(lengths: Sequence[int], target: int) -> Bins:
    """Sequential fill in input order; a bin closes once its total is greater than the target."""
    bins, current, total = [], [], 0
    for i, length in enumerate(lengths):
        current.append(i)
        total += length
        if total > target:
            bins.append(tuple(current))
            current, total = [], 0
    if current:
        bins.append(tuple(current))
    return tuple(bins)


def make_bins(lengths: Sequence[int], target: int, kegalign: bool) -> Bins:
    return kegalign_bins(lengths, target) if kegalign else balanced_bins(lengths, target)


def make_plan(
    ref_lengths: Sequence[int],
    qry_lengths: Sequence[int],
    target: int,
    query_target: int,
    kegalign: bool = False,
) -> Plan:
    """Both sides binned with their own targets."""
    return Plan(
        make_bins(ref_lengths, target, kegalign), make_bins(qry_lengths, query_target, kegalign)
    )


def workers_for(gpus: int, plan: Plan) -> int:
    """min(--gpus, reference bins): the workers a plan runs on (at least one)."""
    return max(1, min(gpus, len(plan.ref_bins)))


def packed_bp(members: Sequence[int], lengths: Sequence[int]) -> int:
    """Packed bytes of one bin: its records and the separators between them."""
    return sum(lengths[i] for i in members) + len(members) - 1


def largest_packed(
    plan: Plan, ref_lengths: Sequence[int], qry_lengths: Sequence[int]
) -> tuple[int, int]:
    """Packed bytes (records and separators) of the largest reference and query bin."""
    r, q = (
        max(bin_bp(bins, lengths)[i] + len(b) - 1 for i, b in enumerate(bins))
        for bins, lengths in ((plan.ref_bins, ref_lengths), (plan.query_bins, qry_lengths))
    )
    return r, q
