"""The automatic layout and the preflight: plan_within_budget halves the block sizes until the
largest unit fits the budget (the memory model's estimate), and auto_layout resolves -B 0.
Neither ever runs for --kegalign-bins or a frozen manifest."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hspz.planning.bins import (
    DEFAULT_BLOCK,
    Plan,
    balanced_bins,
    balanced_bins_n,
    layout_n_bins,
    make_plan,
)


def can_split(plan: Plan) -> bool:
    """Whether halving the targets can still make a bin smaller (records are never split)."""
    return any(len(b) > 1 for b in plan.ref_bins + plan.query_bins)


class NoFit(ValueError):
    """The memory preflight found no plan that fits; `plan` is the last one it tried."""

    def __init__(self, message: str, plan: Plan):
        super().__init__(message)
        self.plan = plan


@dataclass
class Layout:
    """A resolved plan and the block-size targets that reproduce it."""

    plan: Plan
    seq_block_size: int
    query_block_size: int
    notes: list[str]
    fell_back: bool = False  # -B 0 fell back to the default policy (its own layout: line)


def plan_within_budget(
    ref_lengths: Sequence[int],
    qry_lengths: Sequence[int],
    target: int,
    query_target: int,
    fits: Callable[[Plan], bool],
    describe: Callable[[Plan], str],
) -> Layout:
    """The plan at these targets, halving both until `fits` holds; NoFit when even bins of
    single records do not fit (records are never split)."""
    notes: list[str] = []
    for _ in range(64):
        plan = make_plan(ref_lengths, qry_lengths, target, query_target)
        if fits(plan):
            return Layout(plan, target, query_target, notes)
        if not can_split(plan) or target <= 1:
            raise NoFit(f"{describe(plan)}; records are never split", plan)
        notes.append(
            f"note: {describe(plan)}; halving --seq-block-size to {target // 2} and "
            f"--query-block-size to {max(query_target // 2, 1)} (this changes the "
            f"plan and its digest)"
        )
        target, query_target = target // 2, max(query_target // 2, 1)
    raise NoFit(describe(plan), plan)


def auto_ref_bin_count(n_records: int, default_bins: int, workers: int) -> int:
    """The smallest multiple of W not coarser than the default layout, at most one bin per
    record."""
    if n_records == 0:
        return 0
    return min(n_records, math.ceil(max(default_bins, 1) / workers) * workers)


def auto_layout(
    ref_lengths: Sequence[int],
    qry_lengths: Sequence[int],
    workers: int,
    query_target: int | None,
    fits: Callable[[Plan], bool],
    describe: Callable[[Plan], str],
) -> Layout:
    """`-B 0`: at one worker exactly the default plan; at W >= 2 a count-balanced reference of
    a multiple of W bins and, when it fits, the whole query in one bin."""
    ref_total, qry_total = sum(ref_lengths), sum(qry_lengths)
    if workers <= 1:
        q = query_target or DEFAULT_BLOCK
        return plan_within_budget(ref_lengths, qry_lengths, DEFAULT_BLOCK, q, fits, describe)
    r_def = layout_n_bins(ref_total, DEFAULT_BLOCK, len(ref_lengths))
    r = auto_ref_bin_count(len(ref_lengths), r_def, workers)
    ref_bins = balanced_bins_n(ref_lengths, r)
    seq_target = max(math.ceil(ref_total / r), 1)
    if query_target is not None:
        plan = Plan(ref_bins, balanced_bins(qry_lengths, query_target))
        if not fits(plan):
            raise NoFit(
                f"automatic layout (R={r} Q={len(plan.query_bins)}) with the "
                f"explicit --query-block-size: {describe(plan)}; drop "
                f"--query-block-size or give -B explicitly",
                plan,
            )
        return Layout(plan, seq_target, query_target, [])
    single = Plan(ref_bins, balanced_bins_n(qry_lengths, 1))
    if fits(single):
        return Layout(single, seq_target, max(qry_total, 1), [])
    candidate = Plan(ref_bins, balanced_bins(qry_lengths, DEFAULT_BLOCK))
    if fits(candidate):
        return Layout(candidate, seq_target, DEFAULT_BLOCK, [])
    layout = plan_within_budget(
        ref_lengths, qry_lengths, DEFAULT_BLOCK, DEFAULT_BLOCK, fits, describe
    )
    layout.notes.insert(
        0,
        f"layout: auto W={workers} -> default --seq-block-size "
        f"{DEFAULT_BLOCK} --query-block-size {DEFAULT_BLOCK} (candidate "
        f"R={r} Q={len(candidate.query_bins)} did not fit the budget)",
    )
    layout.fell_back = True
    return layout


def layout_line(workers: int, layout: Layout, ref_lengths: Sequence[int]) -> str:
    """`layout: auto W=… -> --seq-block-size S --query-block-size Q (R=r Q=q, U units)`."""
    p = layout.plan
    line = (
        f"layout: auto W={workers} -> --seq-block-size {layout.seq_block_size} "
        f"--query-block-size {layout.query_block_size} (R={len(p.ref_bins)} "
        f"Q={len(p.query_bins)}, {len(p.units)} units)"
    )
    if layout_n_bins(sum(ref_lengths), layout.seq_block_size, len(ref_lengths)) != len(p.ref_bins):
        line += " [these flags do not reproduce R on this input; use --dump-manifest]"
    return line
