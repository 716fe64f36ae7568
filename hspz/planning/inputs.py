"""Inputs: both sides' records read at once (`io.readers.read_both`) and the default-layout plan
over them, before any preflight."""

from __future__ import annotations

from dataclasses import dataclass

from hspz.core.options import Options
from hspz.io.readers import read_both
from hspz.io.records import Record
from hspz.planning import bins as planning


@dataclass
class Inputs:
    """Both sides' records and the frozen plan over them."""

    reference: list[Record]
    query: list[Record]
    plan: planning.Plan


def read_inputs(options: Options, reference: str, query: str) -> Inputs:
    ref, qry = read_both(reference, query)
    return Inputs(ref, qry, make_plan(options, ref, qry))


def make_plan(options: Options, ref: list[Record], qry: list[Record]) -> planning.Plan:
    """The plan at the given block sizes (`-B 0` as the default), without the preflight."""
    target = options.seq_block_size or planning.DEFAULT_BLOCK
    qtarget = options.query_block_size or target
    return planning.make_plan(
        [len(r) for r in ref], [len(r) for r in qry], target, qtarget, options.kegalign_bins
    )
