"""Freezing a job: resolve what `run`'s flags leave open into a manifest, or replay one.

What is resolved: `--max-hits 0` (KegAlign's 4,194,304 per GiB of device memory; the CPU backend
assumes a 16 GiB device), `-B 0` (the automatic layout), and the memory preflight (halving the
block sizes until the largest unit fits a worker's budget; never for `--kegalign-bins` or a
manifest, which fail instead).  A replayed manifest is validated against the run's flags and
inputs and never replanned."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from hspz.core.errors import UsageError
from hspz.core.options import Options
from hspz.core.scoring import resolve_matrix
from hspz.engine.contract import Context
from hspz.formats.manifest import Manifest, check_flags, check_inputs, check_version
from hspz.io.digests import side_digest
from hspz.io.records import Record
from hspz.planning import bins, memory
from hspz.planning import layout as planning_layout
from hspz.planning import schedule as scheduling
from hspz.planning.budget import (
    device_budget,
    host_budget,
    layout_workers,
    per_worker_threads,
    resolve_max_hits,
)
from hspz.run.report import say
from hspz.stages.seed import SeedShape

if TYPE_CHECKING:
    from hspz.planning.seedable import Seedable
    from hspz.run.request import Request

    Sides = tuple[Seedable, Seedable]  # (reference, query) seedable counts (`sides_for`)


@dataclass
class Freeze:
    """What planning needs besides the records."""

    options: Options
    devices: scheduling.Devices
    matrix: np.ndarray
    digests: bool = False  # compute the inputs' sha256 (manifest, plan file)
    notes: list[str] = field(default_factory=list)


def memory_model(f: Freeze, max_hits: int, workers: int) -> memory.MemoryModel:
    """The memory model of this run's flags on `workers` workers."""
    o = f.options
    threads = per_worker_threads(o.threads, workers) or os.cpu_count() or 1
    shape = SeedShape.from_pattern(o.pattern)
    return memory.MemoryModel(
        f.devices.backend,
        shape.weight,
        o.step,
        resident_hits(f.devices, max_hits),
        o.wga_chunk_size,
        o.transition,
        threads,
        shape.size,
        o.interval_size,
    )


def memory_fits(
    f: Freeze,
    max_hits: int,
    ref_lengths: list[int],
    qry_lengths: list[int],
    sides: Sides | None = None,
) -> tuple[Callable[[bins.Plan], bool], Callable[[bins.Plan], str]]:
    """(fits(plan), describe(plan)) for this run's budget: on the CPU backend the whole run's
    host memory (`plan.cpu_estimate`) against 90% of the host's, on the GPU each worker's
    device memory against its share of the free memory.  A plan runs on min(--gpus, its
    reference bins) workers (`plan.workers_for`), so each candidate plan is costed on its
    own worker count.  `sides`: the records' `seedable.sides` (CPU), which the estimate counts
    by their seedable bases, not their lengths."""
    devices, gpus = f.devices, f.options.gpus
    host = host_budget() if devices.backend == "cpu" else None

    def need(p: bins.Plan) -> int:
        w = bins.workers_for(gpus, p)
        model = memory_model(f, max_hits, w)
        if devices.backend == "cpu":
            return memory.cpu_estimate(model, p, ref_lengths, qry_lengths, w, sides).total
        return memory.worst_unit_bytes(model, p, ref_lengths, qry_lengths)

    def budget(p: bins.Plan) -> int | None:
        if devices.backend == "cpu":
            return None if host is None else host[0]
        return device_budget(devices, bins.workers_for(gpus, p))

    def fits(p: bins.Plan) -> bool:
        b = budget(p)
        return b is None or need(p) <= b

    def describe(p: bins.Plan) -> str:
        rbp = max(bins.bin_bp(p.ref_bins, ref_lengths))
        qbp = max(bins.bin_bp(p.query_bins, qry_lengths))
        w = bins.workers_for(gpus, p)
        if devices.backend == "cpu":
            assert host is not None  # a plan only fails a budget there is
            t = memory_model(f, max_hits, w).threads
            return (
                f"the largest unit ({rbp} x {qbp} bp) makes the run need ~"
                f"{_gib(need(p))} GiB of host memory ({w} worker(s), {t} thread(s) each), "
                f"over its {_gib(host[0])} GiB budget (90% of {host[1]})"
            )
        gpu_budget = budget(p)
        assert gpu_budget is not None
        return (
            f"the largest unit ({rbp} x {qbp} bp) needs ~{_gib(need(p))} GiB per "
            f"worker, over the {_gib(gpu_budget)} GiB budget of {w} worker(s)"
        )

    return fits, describe


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f}"


def advice(f: Freeze, p: bins.Plan, frozen: bool = False) -> str:
    """The flags that can make this run fit, as they apply to its backend and plan: fewer
    --gpus when several workers share what the budget covers (the host on the CPU backend, a
    device on the GPU), fewer --threads on the CPU backend (a seed batch and a piece of hits
    per thread), a smaller --max-hits where a chunk's resident hits follow it (on the CPU only
    below the engine's piece, `engine.cpu.PIECE`), a smaller -B/--query-block-size where the
    bins could still shrink.  `frozen`: a manifest's plan, whose -B and --max-hits are fixed."""
    o, devices = f.options, f.devices
    w = bins.workers_for(o.gpus, p)
    cpu = devices.backend == "cpu"
    flags = []
    if w > 1 and (cpu or w > devices.count):
        flags.append("fewer --gpus")
    if cpu and (per_worker_threads(o.threads, w) or os.cpu_count() or 1) > 1:
        flags.append("fewer --threads")
    if not frozen:
        if not cpu or o.max_hits < _cpu_piece():
            flags.append("a smaller --max-hits")
        if planning_layout.can_split(p):
            flags.append("a smaller -B/--query-block-size")
    if not flags:
        return ""
    return " (try " + ", ".join(flags[:-1]) + (" or " if len(flags) > 1 else "") + flags[-1] + ")"


def _cpu_piece() -> int:
    from hspz.engine import cpu

    return cpu.PIECE


def resident_hits(devices: scheduling.Devices, max_hits: int) -> int:
    """Hits of one semantic chunk held at once: at most the engine's physical piece (how it
    streams a chunk never changes bytes)."""
    if devices.backend != "gpu":
        return min(max_hits, _cpu_piece())
    from hspz.engine import gpu

    return min(max_hits, gpu.PIECE)


def plan_layout(
    f: Freeze,
    max_hits: int,
    ref_lengths: list[int],
    qry_lengths: list[int],
    sides: Sides | None = None,
) -> planning_layout.Layout:
    """The plan for fresh flags: -B 0, --kegalign-bins, or explicit sizes with the preflight."""
    o = f.options
    fits, describe = memory_fits(f, max_hits, ref_lengths, qry_lengths, sides)
    try:
        if o.kegalign_bins:
            q = o.resolved_query_block_size
            p = bins.make_plan(ref_lengths, qry_lengths, o.seq_block_size, q, True)
            if not fits(p):
                raise planning_layout.NoFit(
                    f"{describe(p)}; --kegalign-bins never shrinks the blocks", p
                )
            return planning_layout.Layout(p, o.seq_block_size, q, [])
        if o.seq_block_size == 0:
            w = layout_workers(o.gpus, f.devices)
            layout = planning_layout.auto_layout(
                ref_lengths, qry_lengths, w, o.query_block_size, fits, describe
            )
            if not layout.fell_back:
                layout.notes.insert(0, planning_layout.layout_line(w, layout, ref_lengths))
            return layout
        q = o.resolved_query_block_size
        return planning_layout.plan_within_budget(
            ref_lengths, qry_lengths, o.seq_block_size, q, fits, describe
        )
    except planning_layout.NoFit as exc:
        raise UsageError(f"memory preflight: {exc}{advice(f, exc.plan)}") from None


def freeze(f: Freeze, ref: list[Record], qry: list[Record], sides: Sides | None = None) -> Manifest:
    """Resolve --max-hits and the layout into a manifest (notes go to `f.notes`); `sides`:
    the records' `sides_for`, when the caller counted them already."""
    o = f.options
    max_hits = resolve_max_hits(o, f.devices)
    rl, ql = [len(r) for r in ref], [len(r) for r in qry]
    layout = plan_layout(f, max_hits, rl, ql, sides or sides_for(f.devices, ref, qry))
    f.notes += layout.notes
    resolved = o.replace(
        seq_block_size=layout.seq_block_size,
        query_block_size=layout.query_block_size,
        max_hits=max_hits,
    )
    requested = dict(
        seq_block_size=o.seq_block_size, query_block_size=o.query_block_size, max_hits=o.max_hits
    )
    digests = (side_digest(ref), side_digest(qry)) if f.digests else ("-", "-")
    return Manifest(
        resolved,
        f.matrix,
        layout.plan,
        [r.name for r in ref],
        rl,
        [r.name for r in qry],
        ql,
        *digests,
        requested,
    )


def replay(
    m: Manifest,
    options: Options,
    explicit: set[str],
    ref: list[Record],
    qry: list[Record],
    source: str,
) -> Manifest:
    """Validate a frozen manifest against this run's flags and inputs; fail, never replan."""
    check_version(m, source)
    matrix = None
    if explicit & {"scoring", "ambiguous", "xdrop"}:
        matrix = resolve_matrix(options.xdrop, options.scoring, options.ambiguous)
    check_flags(m, options, explicit, matrix, source)
    check_inputs(m, ref, qry, source)
    return m


def context_of(m: Manifest, keep_raw: bool = False) -> Context:
    """The engine context of a frozen job: its resolved options and its frozen matrix."""
    o = m.options
    return Context(o, SeedShape.from_pattern(o.pattern), np.asarray(m.matrix, np.int32), keep_raw)


def load_manifest(req: Request, ref: list[Record], qry: list[Record]) -> Manifest | None:
    """--from-manifest, validated against this run's flags and inputs (not yet its budget)."""
    from hspz.formats.frozen import read_manifest

    if not req.from_manifest:
        return None
    m = read_manifest(req.from_manifest)
    return replay(m, req.options, req.explicit, ref, qry, req.from_manifest)


def prepare(
    req: Request,
    devices: scheduling.Devices,
    ref: list[Record],
    qry: list[Record],
    digests: bool,
    loaded: Manifest | None = None,
    sides: Sides | None = None,
) -> Manifest:
    """The frozen job: a loaded manifest checked against the budget, or planned from flags
    (`sides`: as `freeze` takes them)."""
    if loaded is not None:
        # the frozen settings, with this run's workers and threads
        o = loaded.options.replace(gpus=req.options.gpus, threads=req.options.threads)
        f = Freeze(o, devices, loaded.matrix)
        fits, describe = memory_fits(
            f,
            o.max_hits,
            loaded.ref_lengths,
            loaded.qry_lengths,
            sides or sides_for(devices, ref, qry),
        )
        if not fits(loaded.plan):
            raise UsageError(
                f"{req.from_manifest}: {describe(loaded.plan)}; a frozen plan is "
                f"never replanned{advice(f, loaded.plan, frozen=True)}"
            )
        return loaded
    o = req.options
    matrix = resolve_matrix(o.xdrop, o.scoring, o.ambiguous)
    f = Freeze(o, devices, matrix, digests or bool(req.dump_manifest))
    m = freeze(f, ref, qry, sides)
    say(f.notes)
    return m


def sides_for(devices: scheduling.Devices, ref: list[Record], qry: list[Record]) -> Sides | None:
    """The records' seedable bases for the CPU estimate (`seedable.sides`); None on the GPU."""
    if devices.backend != "cpu":
        return None
    from hspz.planning import seedable

    return seedable.sides(ref, qry)


def memory_estimate(
    options: Options,
    devices: scheduling.Devices,
    m: Manifest,
    ref: list[Record] | None = None,
    qry: list[Record] | None = None,
    sides: Sides | None = None,
) -> memory.HostEstimate | None:
    """The CPU backend's host memory estimate for a frozen job on this run's workers and
    threads (what `--time` prints beside the peak RSS), counting the records' seedable bases
    when they are given; None on the GPU backend."""
    if devices.backend != "cpu":
        return None
    o = m.options.replace(gpus=options.gpus, threads=options.threads)
    w = bins.workers_for(o.gpus, m.plan)
    model = memory_model(Freeze(o, devices, m.matrix), o.max_hits, w)
    if sides is None and ref is not None and qry is not None:
        sides = sides_for(devices, ref, qry)
    return memory.cpu_estimate(model, m.plan, m.ref_lengths, m.qry_lengths, w, sides)


def write_dumps(req: Request, m: Manifest) -> None:
    from hspz.core.durable import write_text
    from hspz.run import report

    if req.dump_plan:
        report.write_plan(req.dump_plan, m)
    if req.dump_manifest:
        write_text(req.dump_manifest, m.to_text(), "--dump-manifest")


def schedule_for(m: Manifest, workers: int, devices: scheduling.Devices) -> scheduling.Schedule:
    """The run's schedule (`--gpus` workers), its lines said."""
    ref_bp = bins.bin_bp(m.plan.ref_bins, m.ref_lengths)
    sched = scheduling.run_schedule(m.plan, ref_bp, workers, devices)
    say(scheduling.schedule_lines(sched))
    return sched
