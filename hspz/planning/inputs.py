"""Inputs: both sides' records read at once, the default-layout plan over them, and the record
tables (names and offsets, no bases) that the emitter needs from a frozen plan."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from hspz.core.errors import InputError
from hspz.core.options import Options
from hspz.io.packing import PackedBin, Record, read_records
from hspz.planning import memory as planning

if TYPE_CHECKING:
    from hspz.formats.manifest import Manifest


@dataclass
class Inputs:
    """Both sides' records and the frozen plan over them."""

    reference: list[Record]
    query: list[Record]
    plan: planning.Plan


def read_side(path: str, side: str) -> list[Record]:
    records = read_records(path)
    if not records:
        raise InputError(f"{path}: no {side} records")
    return records


def read_both(reference: str, query: str) -> tuple[list[Record], list[Record]]:
    """Both sides, read at once on two threads (the decoding loops release the GIL); a bad
    reference is reported before a bad query, as when read one after the other."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        ref = pool.submit(read_side, reference, "reference")
        qry = pool.submit(read_side, query, "query")
        return ref.result(), qry.result()


def read_inputs(options: Options, reference: str, query: str) -> Inputs:
    ref, qry = read_both(reference, query)
    return Inputs(ref, qry, make_plan(options, ref, qry))


def make_plan(options: Options, ref: list[Record], qry: list[Record]) -> planning.Plan:
    """The plan at the given block sizes (`-B 0` as the default), without the preflight."""
    target = options.seq_block_size or planning.DEFAULT_BLOCK
    qtarget = options.query_block_size or target
    return planning.make_plan([len(r) for r in ref], [len(r) for r in qry], target, qtarget,
                              options.kegalign_bins)


def table_from(names: list[str], lengths: list[int], prefix: str, strand: str) -> PackedBin:
    """Names and offsets of a bin without its bases: what the emitter needs."""
    lengths_a = np.array(lengths, np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths_a + 1)[:-1])).astype(np.int64)
    prefixed = tuple(prefix + n for n in names)
    block_len = int(lengths_a.sum() + len(lengths_a) - 1)
    if strand == "minus":
        starts, lengths_a, prefixed = (block_len - starts - lengths_a)[::-1], lengths_a[::-1], \
            prefixed[::-1]
    return PackedBin(np.empty(0, np.uint8), block_len, prefixed, starts.copy(), lengths_a.copy())


def table_lookup(m: Manifest):
    """(side, bin, strand) -> record table, from the manifest's names and lengths."""
    cache: dict[tuple[str, int, str], PackedBin] = {}

    def lookup(side: str, b: int, strand: str) -> PackedBin:
        key = (side, b, strand)
        if key not in cache:
            ref = side == "reference"
            bins = m.plan.ref_bins if ref else m.plan.query_bins
            names = m.ref_names if ref else m.qry_names
            lengths = m.ref_lengths if ref else m.qry_lengths
            prefix = m.options.target_prefix if ref else m.options.query_prefix
            cache[key] = table_from([names[i] for i in bins[b]], [lengths[i] for i in bins[b]],
                                    prefix, strand)
        return cache[key]

    return lookup
