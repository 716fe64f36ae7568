"""The `run` driver: every stage in order, for one reference and one query.

    read records -> plan bins and units -> prepare bins -> engine.run_unit per unit -> emit

`hspZ plan`/`work`/`merge` and the Snakemake workflow call the same functions in separate
processes; `run` does them in one.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hspz import plan as planning
from hspz.emit import Emitter
from hspz.engine import Context, prepare_query, prepare_reference
from hspz.errors import InputError, UsageError
from hspz.options import Options
from hspz.sequence import PackedBin, Record, read_records

DEFAULT_TARBALL = "segments.tar.gz"


@dataclass
class Inputs:
    """Both sides' records and the frozen plan over them."""

    reference: list[Record]
    query: list[Record]
    plan: planning.Plan


@dataclass
class Summary:
    seeds: int = 0
    hits: int = 0
    raw_hsps: int = 0
    hsps: int = 0
    digest: str = ""
    results: list = field(default_factory=list)
    phases: dict = field(default_factory=dict)


def check_output_dir(outdir: str | Path) -> None:
    """Refuse early an OUT that cannot be created or written, before any work."""
    path = Path(outdir).absolute()
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise UsageError(f"--output: {probe} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(f"--output: cannot create or write {path} (no write permission on {probe})")


def read_inputs(options: Options, reference: str, query: str) -> Inputs:
    ref = read_records(reference)
    qry = read_records(query)
    for side, records, path in (("reference", ref, reference), ("query", qry, query)):
        if not records:
            raise InputError(f"{path}: no {side} records")
    return Inputs(ref, qry, make_plan(options, ref, qry))


def make_plan(options: Options, ref: list[Record], qry: list[Record]) -> planning.Plan:
    target = options.seq_block_size or planning.DEFAULT_BLOCK
    qtarget = options.resolved_query_block_size or planning.DEFAULT_BLOCK
    return planning.Plan(
        planning.make_bins([len(r) for r in ref], target, options.kegalign_bins),
        planning.make_bins([len(r) for r in qry], qtarget, options.kegalign_bins),
    )


def record_table(records: list[Record], prefix: str, strand: str) -> PackedBin:
    """Names and offsets of a bin without its bases: what the emitter needs."""
    lengths = np.array([len(r) for r in records], np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths + 1)[:-1])).astype(np.int64)
    names = tuple(prefix + r.name for r in records)
    block_len = int(lengths.sum() + len(lengths) - 1)
    if strand == "minus":
        starts, lengths, names = (block_len - starts - lengths)[::-1], lengths[::-1], names[::-1]
    return PackedBin(np.empty(0, np.uint8), block_len, names, starts.copy(), lengths.copy())


def run(options: Options, inputs: Inputs, outdir: str | Path, engine, tarball=None,
        progress=None) -> Summary:
    """Run every unit of the plan through `engine` and emit the segments files."""
    ctx = Context.from_options(options)
    p = inputs.plan
    summary = Summary()

    def bin_records(side: str, b: int) -> list[Record]:
        bins = p.ref_bins if side == "reference" else p.query_bins
        records = inputs.reference if side == "reference" else inputs.query
        return [records[i] for i in bins[b]]

    def tables(side: str, b: int, strand: str) -> PackedBin:
        prefix = options.target_prefix if side == "reference" else options.query_prefix
        return record_table(bin_records(side, b), prefix, strand)

    emitter = Emitter(p.units, tables, outdir, tarball)
    try:
        queries = [prepare_query(ctx, q, bin_records("query", q)) for q in range(len(p.query_bins))]
        units = p.units
        for r in range(len(p.ref_bins)):
            t0 = time.perf_counter()
            ref = prepare_reference(ctx, r, bin_records("reference", r))
            summary.phases["reference build"] = summary.phases.get("reference build", 0.0) + (
                time.perf_counter() - t0)
            for unit in (u for u in units if u.ref_bin == r):
                result = engine.run_unit(ctx, ref, queries[unit.query_bin], unit.ordinal)
                summary.results.append(result)
                emitter.add(result)
                if progress:
                    progress(unit, len(units))
        summary.digest = emitter.finish()
    except BaseException:
        emitter.abort()
        raise
    for key, value in emitter.counts.items():
        setattr(summary, key, value)
    return summary


def print_counts(summary: Summary, stream=sys.stderr) -> None:
    print(f"#seeds: {summary.seeds}", file=stream)
    print(f"#seed hits: {summary.hits}", file=stream)
    print(f"#raw HSPs: {summary.raw_hsps}", file=stream)
    print(f"#HSPs: {summary.hsps}", file=stream)
