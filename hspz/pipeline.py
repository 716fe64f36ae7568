"""The drivers: every stage in order, for `run` and for its three workflow steps.

    read records -> freeze the plan (manifest) -> schedule -> workers (engine.run_unit) -> emit

`hspZ run` does it all in one process (its workers may be processes of their own).  The
workflow splits it: `hspZ plan` freezes the plan and the schedule into a plan file, `hspZ work`
runs one worker's units into a results file, `hspZ merge` replays every result into the outputs.
All of them call the functions below, so their outputs are the same bytes.

Freezing resolves what `run`'s flags leave open: `--max-hits 0` (KegAlign's 4,194,304 per GiB of
device memory; the CPU backend assumes a 16 GiB device), `-B 0` (the automatic layout), and the
memory preflight (halving the block sizes until the largest unit fits a worker's budget; never
for `--kegalign-bins` or a manifest, which fail instead).  `HSPZ_HOST_MEMORY_BYTES` overrides the
host memory the budget sees (a test hook).
"""

from __future__ import annotations

import math
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hspz import estimate, knobs
from hspz import plan as planning
from hspz import schedule as scheduling
from hspz.emit import Emitter
from hspz.engine import Context, UnitResult
from hspz.errors import InputError, RunError, UsageError
from hspz.manifest import Manifest, check_flags, check_inputs, check_version
from hspz.options import Options
from hspz.scoring import resolve_matrix
from hspz.seed import SeedShape
from hspz.sequence import SMALL_BYTES, PackedBin, Record, read_records, records_digest
from hspz.workers import Pool, WorkerJob, WorkerReport, run_worker, run_workers

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
    results: list = field(default_factory=list)  # UnitResults, kept only for --dump-raw
    phases: dict = field(default_factory=dict)
    ledger: list = field(default_factory=list)  # per emitted unit: its ledger row
    reports: list = field(default_factory=list)  # WorkerReports
    hit_stats: estimate.HitHistogram | None = None
    manifest: Manifest | None = None
    schedule: scheduling.Schedule | None = None


@contextmanager
def timed(phases: dict, name: str):
    """Add the wall-clock seconds of the block to `phases[name]`."""
    t = time.perf_counter()
    try:
        yield
    finally:
        phases[name] = phases.get(name, 0.0) + time.perf_counter() - t


# --------------------------------------------------------------------------------------------
# Inputs and record tables
# --------------------------------------------------------------------------------------------


def check_output_dir(outdir: str | Path, flag: str = "--output") -> None:
    """Refuse early an OUT that cannot be created or written, before any work."""
    path = Path(outdir).absolute()
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise UsageError(f"{flag}: {probe} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(f"{flag}: cannot create or write {path} (no write permission on {probe})")


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


# --------------------------------------------------------------------------------------------
# Devices, budgets and --max-hits 0
# --------------------------------------------------------------------------------------------


def backend_of(engine) -> str:
    return "gpu" if engine.__name__.endswith(".gpu") else "cpu"


def devices_for(engine, gpus: int) -> scheduling.Devices:
    if backend_of(engine) == "gpu":
        return scheduling.gpu_devices()
    return scheduling.cpu_devices(gpus)


def host_memory_bytes() -> int | None:
    """Host memory available to this process: HSPZ_HOST_MEMORY_BYTES, else the tightest cgroup
    limit above it, else MemAvailable."""
    forced = os.environ.get("HSPZ_HOST_MEMORY_BYTES", "")
    if forced.isdigit():
        return int(forced)
    limits = [x for x in (_cgroup_free(), _meminfo_available()) if x is not None]
    return min(limits) if limits else None


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and int(text) < (1 << 62) else None


def _cgroup_free() -> int | None:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    best = None
    for line in lines:
        _, ctrl, rel = line.split(":", 2)
        if ctrl == "":
            root, files = Path("/sys/fs/cgroup"), ("memory.max", "memory.current")
        elif "memory" in ctrl.split(","):
            root, files = Path("/sys/fs/cgroup/memory"), ("memory.limit_in_bytes",
                                                          "memory.usage_in_bytes")
        else:
            continue
        d = root / rel.lstrip("/")
        while d.is_relative_to(root):
            limit, used = _read_int(d / files[0]), _read_int(d / files[1])
            if limit is not None and used is not None:
                best = limit - used if best is None else min(best, limit - used)
            if d == root:
                break
            d = d.parent
    return best


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def device_budget(devices: scheduling.Devices, workers: int) -> int | None:
    """Bytes one worker may use: free GPU memory of device 0 shared by the workers on it, or
    90% of host memory shared by every CPU worker."""
    if devices.backend == "gpu":
        import cupy

        free = cupy.cuda.Device(0).mem_info[0]
        return free // math.ceil(workers / devices.count)
    host = host_memory_bytes()
    return None if host is None else host * 9 // 10 // max(workers, 1)


def resolve_max_hits(options: Options, devices: scheduling.Devices) -> int:
    """`--max-hits 0` -> KegAlign's 4,194,304 × device GiB (16 GiB stand-in on the CPU)."""
    if options.max_hits > 0:
        return options.max_hits
    if devices.backend == "gpu" and devices.memory:
        return planning.kegalign_max_hits(devices.memory[0])
    return planning.kegalign_max_hits(planning.CPU_DEVICE_GIB << 30)


def layout_workers(gpus: int, devices: scheduling.Devices) -> int:
    """Workers the `-B 0` layout is made for: HSPZ_LAYOUT_FORCE_WORKERS, else
    min(--gpus, devices)."""
    forced = knobs.read().layout_force_workers
    return forced if forced is not None else max(1, min(gpus, devices.count))


def per_worker_threads(threads: int, workers: int) -> int:
    """`--threads` is the machine's budget: one worker gets it as given (0 = all cores),
    several share it."""
    if workers <= 1:
        return threads
    return max(1, (threads or os.cpu_count() or 1) // workers)


# --------------------------------------------------------------------------------------------
# Freezing the plan
# --------------------------------------------------------------------------------------------


@dataclass
class Freeze:
    """What planning needs besides the records."""

    options: Options
    devices: scheduling.Devices
    matrix: np.ndarray
    digests: bool = False  # compute the inputs' sha256 (manifest, plan file)
    notes: list[str] = field(default_factory=list)


def memory_fits(f: Freeze, max_hits: int, ref_lengths: list[int], qry_lengths: list[int]):
    """(fits(plan), describe(plan)) for this run's workers and budget."""
    o, devices = f.options, f.devices
    workers = max(1, o.gpus)
    threads = per_worker_threads(o.threads, workers) or os.cpu_count() or 1
    model = planning.MemoryModel(devices.backend, SeedShape.from_pattern(o.pattern).weight,
                                 o.step, resident_hits(devices, max_hits), o.wga_chunk_size,
                                 o.transition, threads)
    budget = device_budget(devices, workers)

    def need(p: planning.Plan) -> int:
        return planning.worst_unit_bytes(model, p, ref_lengths, qry_lengths)

    def fits(p: planning.Plan) -> bool:
        return budget is None or need(p) <= budget

    def describe(p: planning.Plan) -> str:
        rbp = max(planning.bin_bp(p.ref_bins, ref_lengths))
        qbp = max(planning.bin_bp(p.query_bins, qry_lengths))
        return (f"the largest unit ({rbp} x {qbp} bp) needs ~{need(p) / 2**30:.2f} GiB per "
                f"worker, over the {budget / 2**30:.2f} GiB budget of {workers} worker(s)")

    return fits, describe


def resident_hits(devices: scheduling.Devices, max_hits: int) -> int:
    """Hits of one semantic chunk held at once: all of them on the CPU; on the GPU at most the
    engine's physical piece (how it streams a chunk never changes bytes)."""
    if devices.backend != "gpu":
        return max_hits
    from hspz.engine import gpu

    return min(max_hits, getattr(gpu, "PIECE", max_hits))


def plan_layout(f: Freeze, max_hits: int, ref_lengths: list[int],
                qry_lengths: list[int]) -> planning.Layout:
    """The plan for fresh flags: -B 0, --kegalign-bins, or explicit sizes with the preflight."""
    o = f.options
    fits, describe = memory_fits(f, max_hits, ref_lengths, qry_lengths)
    try:
        if o.kegalign_bins:
            q = o.resolved_query_block_size
            p = planning.make_plan(ref_lengths, qry_lengths, o.seq_block_size, q, True)
            if not fits(p):
                raise ValueError(f"{describe(p)}; --kegalign-bins never shrinks the blocks")
            return planning.Layout(p, o.seq_block_size, q, [])
        if o.seq_block_size == 0:
            w = layout_workers(o.gpus, f.devices)
            layout = planning.auto_layout(ref_lengths, qry_lengths, w, o.query_block_size,
                                          fits, describe)
            if not layout.fell_back:
                layout.notes.insert(0, planning.layout_line(w, layout, ref_lengths))
            return layout
        q = o.resolved_query_block_size
        return planning.plan_within_budget(ref_lengths, qry_lengths, o.seq_block_size, q,
                                           fits, describe)
    except ValueError as exc:
        raise UsageError(f"memory preflight: {exc}; records are never split (use fewer "
                         f"--gpus or a smaller --max-hits)") from None


def freeze(f: Freeze, ref: list[Record], qry: list[Record]) -> Manifest:
    """Resolve --max-hits and the layout into a manifest (notes go to `f.notes`)."""
    o = f.options
    max_hits = resolve_max_hits(o, f.devices)
    rl, ql = [len(r) for r in ref], [len(r) for r in qry]
    layout = plan_layout(f, max_hits, rl, ql)
    f.notes += layout.notes
    resolved = o.replace(seq_block_size=layout.seq_block_size,
                         query_block_size=layout.query_block_size, max_hits=max_hits)
    requested = dict(seq_block_size=o.seq_block_size, query_block_size=o.query_block_size,
                     max_hits=o.max_hits)
    digests = (records_digest(ref), records_digest(qry)) if f.digests else ("-", "-")
    return Manifest(resolved, f.matrix, layout.plan, [r.name for r in ref], rl,
                    [r.name for r in qry], ql, *digests, requested)


def replay(m: Manifest, options: Options, explicit: set[str], ref: list[Record],
           qry: list[Record], source: str) -> Manifest:
    """Validate a frozen manifest against this run's flags and inputs; fail, never replan."""
    check_version(m, source)
    matrix = None
    if explicit & {"scoring", "ambiguous", "xdrop"}:
        matrix = resolve_matrix(options.xdrop, options.scoring, options.ambiguous)
    check_flags(m, options, explicit, matrix, source)
    check_inputs(m, records_digest(ref), records_digest(qry), source)
    return m


def context_of(m: Manifest, keep_raw: bool = False) -> Context:
    """The engine context of a frozen job: its resolved options and its frozen matrix."""
    o = m.options
    return Context(o, SeedShape.from_pattern(o.pattern), np.asarray(m.matrix, np.int32),
                   keep_raw)


# --------------------------------------------------------------------------------------------
# Executing
# --------------------------------------------------------------------------------------------


@dataclass
class Execution:
    """How to run a frozen job: where results go and what to keep."""

    outdir: str | Path
    tarball: str | Path | None = None
    diagonal: bool = False
    keep_raw: bool = False  # the engine keeps pre-dedup HSPs (--dump-raw)
    hit_stats: bool = False
    progress: object = None
    keep_results: bool = False  # Summary.results holds every UnitResult (--dump-raw, library)


def worker_jobs(m: Manifest, sched: scheduling.Schedule, engine_name: str, threads: int,
                t0: float, keep_raw: bool = False, hit_stats: bool = False) -> list[WorkerJob]:
    ctx = context_of(m, keep_raw)
    per = per_worker_threads(threads, sched.workers)
    return [WorkerJob(k, sched.devices[k], sched.visits[k], ctx, m.plan, engine_name, per, t0,
                      hit_stats) for k in range(sched.workers)]


def ledger_row(m: Manifest, r: UnitResult, label: str) -> dict:
    rbp = planning.bin_bp(m.plan.ref_bins, m.ref_lengths)[r.ref_bin]
    qbp = planning.bin_bp(m.plan.query_bins, m.qry_lengths)[r.query_bin]
    return dict(ordinal=r.ordinal, worker=r.worker, device=label, ref_bin=r.ref_bin,
                query_bin=r.query_bin, ref_bp=rbp, query_bp=qbp, gpu_ms=r.gpu_ms,
                host_start_ms=r.host_start_ms, host_end_ms=r.host_end_ms, seeds=r.seeds,
                hits=r.hits, raw_hsps=r.raw_hsps, hsps=r.hsps)


def execute(m: Manifest, sched: scheduling.Schedule, engine_name: str, threads: int,
            ref: list[Record], qry: list[Record], how: Execution, t0: float | None = None,
            summary: Summary | None = None, pool: Pool | None = None) -> Summary:
    """Run every worker of the schedule and emit their results in ordinal order."""
    summary = summary or Summary()
    summary.manifest, summary.schedule = m, sched
    t0 = time.perf_counter() if t0 is None else t0
    labels = dict(enumerate(sched.labels))
    total = len(m.plan.units)

    def emitted(result: UnitResult) -> None:
        summary.ledger.append(ledger_row(m, result, labels.get(result.worker, "")))
        if how.keep_results or how.keep_raw:
            summary.results.append(result)
        if how.progress:
            how.progress(result, total)

    emitter = Emitter(m.plan.units, table_lookup(m), how.outdir, how.tarball, how.diagonal,
                      emitted)
    summary.hit_stats = estimate.HitHistogram() if how.hit_stats else None

    def sink(result: UnitResult, extras) -> None:
        if extras is not None and summary.hit_stats is not None:
            summary.hit_stats.merge(extras)
        emitter.add(result)

    jobs = worker_jobs(m, sched, engine_name, threads, t0, how.keep_raw, how.hit_stats)
    try:
        with timed(summary.phases, "workers"):
            summary.reports = run_workers(jobs, ref, qry, sink, pool)
        with timed(summary.phases, "publish"):
            summary.digest = emitter.finish()
    except BaseException:
        emitter.abort()
        raise
    say_removed(emitter)
    check_lifecycle(summary.reports, sched)
    for key, value in emitter.counts.items():
        setattr(summary, key, value)
    return summary


def check_lifecycle(reports: list[WorkerReport], sched: scheduling.Schedule) -> None:
    """builds + loads = uploads = Σ visits, and every planned unit ran once."""
    builds = sum(r.builds for r in reports)
    uploads = sum(r.uploads for r in reports)
    units = sum(r.units for r in reports)
    planned = sum(v.units for vs in sched.visits for v in vs)
    if not builds == uploads == sched.total_visits or units != planned:
        raise RunError(f"lifecycle mismatch: {builds} builds, {uploads} uploads, "
                       f"{sched.total_visits} visits, {units} of {planned} units")


def run(options: Options, inputs: Inputs, outdir: str | Path, engine, tarball=None,
        progress=None) -> Summary:
    """Run `inputs.plan` through `engine` into `outdir` (the in-library entry point used by
    `compare` and `benchmark`): --gpus workers, no manifest, no preflight."""
    devices = devices_for(engine, options.gpus)
    matrix = resolve_matrix(options.xdrop, options.scoring, options.ambiguous)
    resolved = options.replace(max_hits=resolve_max_hits(options, devices))
    p = inputs.plan
    m = Manifest(resolved, matrix, p, [r.name for r in inputs.reference],
                 [len(r) for r in inputs.reference], [r.name for r in inputs.query],
                 [len(r) for r in inputs.query], "-", "-")
    ref_bp = planning.bin_bp(p.ref_bins, m.ref_lengths)
    sched = scheduling.make_schedule(p, ref_bp, options.gpus, devices,
                                     scheduling.partition_knob())
    return execute(m, sched, engine.__name__, options.threads, inputs.reference, inputs.query,
                   Execution(outdir, tarball, options.diagonal_partition, progress=progress,
                             keep_results=True))


def print_counts(summary: Summary, stream=None) -> None:
    stream = stream or sys.stderr
    print(f"#seeds: {summary.seeds}", file=stream)
    print(f"#seed hits: {summary.hits}", file=stream)
    print(f"#raw HSPs: {summary.raw_hsps}", file=stream)
    print(f"#HSPs: {summary.hsps}", file=stream)


# --------------------------------------------------------------------------------------------
# Commands: run, plan, work, merge, hits-estimate
# --------------------------------------------------------------------------------------------


@dataclass
class Request:
    """What a planning command was asked for (the CLI fills it after validation)."""

    options: Options
    explicit: set[str]
    reference: str
    query: str
    output: str = "."
    tarball: str | None = None
    from_manifest: str | None = None
    dump_manifest: str | None = None
    dump_plan: str | None = None
    dump_raw: str | None = None
    time: bool = False
    hit_stats: bool = False
    cpu_only: bool = False


def say(lines) -> None:
    for line in [lines] if isinstance(lines, str) else lines:
        print(line, file=sys.stderr)


def say_removed(emitter: Emitter) -> None:
    """One line when publishing removed segments files an earlier run left in OUT."""
    if emitter.removed:
        say(f"output: removed {len(emitter.removed)} segments file(s) that an earlier run left "
            f"in {emitter.outdir} and this run did not write (first: {emitter.removed[0]})")


def load_manifest(req: Request, ref: list[Record], qry: list[Record]) -> Manifest | None:
    """--from-manifest, validated against this run's flags and inputs (not yet its budget)."""
    from hspz.manifest import read_manifest

    if not req.from_manifest:
        return None
    m = read_manifest(req.from_manifest)
    return replay(m, req.options, req.explicit, ref, qry, req.from_manifest)


def prepare(req: Request, devices: scheduling.Devices, ref: list[Record], qry: list[Record],
            digests: bool, loaded: Manifest | None = None) -> Manifest:
    """The frozen job: a loaded manifest checked against the budget, or planned from flags."""
    if loaded is not None:
        fits, describe = memory_fits(Freeze(req.options, devices, loaded.matrix),
                                     loaded.options.max_hits, loaded.ref_lengths,
                                     loaded.qry_lengths)
        if not fits(loaded.plan):
            raise UsageError(f"{req.from_manifest}: {describe(loaded.plan)}; a frozen plan is "
                             f"never replanned")
        return loaded
    o = req.options
    matrix = resolve_matrix(o.xdrop, o.scoring, o.ambiguous)
    f = Freeze(o, devices, matrix, digests or bool(req.dump_manifest))
    m = freeze(f, ref, qry)
    say(f.notes)
    return m


def write_dumps(req: Request, m: Manifest) -> None:
    from hspz import report
    from hspz.manifest import write_text

    if req.dump_plan:
        report.write_plan(req.dump_plan, m)
    if req.dump_manifest:
        write_text(req.dump_manifest, m.to_text())


def schedule_for(m: Manifest, gpus: int, devices: scheduling.Devices) -> scheduling.Schedule:
    ref_bp = planning.bin_bp(m.plan.ref_bins, m.ref_lengths)
    sched = scheduling.make_schedule(m.plan, ref_bp, gpus, devices, scheduling.partition_knob())
    say(scheduling.schedule_lines(sched))
    return sched


def run_command(req: Request, select) -> int:
    """`hspZ run`: read, plan, schedule, run the workers, emit, report.  `select()` picks the
    engine once the inputs have been read, so bad input is reported before backend notes."""
    t0 = time.perf_counter()
    summary = Summary()
    with early_pool(req) as pool:
        return _run(req, select, t0, summary, pool)


def early_pool(req: Request):
    """The worker processes of a `--gpus W` run (W > 1), started before reading the inputs so
    that their start-up overlaps it (BENCHMARKS.md); a null context otherwise."""
    if req.options.gpus < 2 or req.cpu_only:
        return nullcontext()
    engine = "hspz.engine.cpu" if req.options.backend == "cpu" else "hspz.engine.gpu"
    return Pool(req.options.gpus, engine, may_hold_large_bins([req.reference, req.query]))


def may_hold_large_bins(paths: list[str]) -> bool:
    """Whether an input may hold a bin of `sequence.SMALL_BYTES` bases, which loads numba to
    prepare (a 2bit or gzip file holds about 4 bases a byte): worker processes then load it
    while the parent reads (a GPU worker otherwise loads it when its first large query bin is
    reverse-complemented)."""
    def size(path: str) -> int:
        try:
            return os.path.getsize(path)
        except OSError:  # reported when the inputs are read
            return 0

    return any(4 * size(p) >= SMALL_BYTES for p in paths)


def _run(req: Request, select, t0: float, summary: Summary, pool) -> int:
    from hspz import report

    o = req.options
    with timed(summary.phases, "input"):
        ref, qry = read_both(req.reference, req.query)
    with timed(summary.phases, "plan"):
        loaded = load_manifest(req, ref, qry)
        engine = select()
        devices = devices_for(engine, o.gpus)
        m = prepare(req, devices, ref, qry, False, loaded)
    write_dumps(req, m)
    if req.cpu_only:
        return report.cpu_only(context_of(m), m.plan, ref, qry)
    sched = schedule_for(m, o.gpus, devices)
    how = Execution(req.output, req.tarball, o.diagonal_partition, bool(req.dump_raw),
                    req.hit_stats, report.progress_printer())
    execute(m, sched, engine.__name__, o.threads, ref, qry, how, t0, summary, pool)
    print_counts(summary)
    if req.dump_raw:
        report.write_raw(req.dump_raw, summary)
    if req.time:
        report.print_time(summary, time.perf_counter() - t0)
    if req.hit_stats:
        report.print_hit_stats(summary.hit_stats)
    print(f"digest: {summary.digest}")
    return 0


def plan_command(req: Request, select) -> int:
    """`hspZ plan`: freeze the plan and the schedule for --gpus workers into one file."""
    from hspz.manifest import plan_text, write_text

    ref, qry = read_both(req.reference, req.query)
    loaded = load_manifest(req, ref, qry)
    devices = devices_for(select(), req.options.gpus)
    m = prepare(req, devices, ref, qry, True, loaded)
    write_dumps(req, m)
    sched = schedule_for(m, req.options.gpus, devices)
    text = plan_text(m, sched, os.path.abspath(req.reference), os.path.abspath(req.query))
    write_text(req.output, text)
    print(f"plan: {len(m.plan.ref_bins)} reference bins, {len(m.plan.query_bins)} query bins, "
          f"{len(m.plan.units)} units, {sched.workers} workers -> {req.output}",
          file=sys.stderr)
    return 0


def work_command(plan_path: str, worker: int, output: str, select, threads: int,
                 device: int | None = None) -> int:
    """`hspZ work`: run one worker's units of a plan file into one results file."""
    from hspz.manifest import read_plan, write_results

    pf = read_plan(plan_path)
    m, sched = pf.manifest, pf.schedule
    if not 0 <= worker < sched.workers:
        raise UsageError(f"--worker: {worker} is not a worker of {plan_path} "
                         f"(0..{sched.workers - 1})")
    check_version(m, plan_path)
    ref, qry = read_both(pf.reference, pf.query)
    check_inputs(m, records_digest(ref), records_digest(qry), plan_path)
    engine = select()
    if device is None:
        device = worker % devices_for(engine, sched.workers).count
    t0 = time.perf_counter()
    job = WorkerJob(worker, device, sched.visits[worker], context_of(m), m.plan,
                    engine.__name__, threads, t0)
    results: list[UnitResult] = []
    rep = run_worker(job, ref, qry, lambda r, _: results.append(r))
    write_results(output, results, dict(plan=pf.digest, worker=worker, workers=sched.workers,
                                        busy_ms=rep.busy_ms, finished_ms=rep.finished_ms))
    print(f"work: worker {worker} ran {len(results)} unit(s) in {rep.finished_ms / 1e3:.3f} s "
          f"-> {output}", file=sys.stderr)
    return 0


def merge_command(plan_path: str, outdir: str, tarball: str | None, diagonal: bool,
                  result_paths: list[str]) -> int:
    """`hspZ merge`: replay every worker's results in ordinal order into the outputs."""
    from hspz.manifest import read_plan, read_results

    pf = read_plan(plan_path)
    m = pf.manifest
    emitter = Emitter(m.plan.units, table_lookup(m), outdir, tarball, diagonal)
    try:
        for path in result_paths:
            header, results = read_results(path)
            if header.get("plan") != pf.digest:
                raise InputError(f"{path}: these results belong to another plan than "
                                 f"{plan_path}")
            for result in results:
                emitter.add(result)
        digest = emitter.finish()
    except BaseException:
        emitter.abort()
        raise
    say_removed(emitter)
    summary = Summary(**emitter.counts, digest=digest)
    print_counts(summary)
    print(f"digest: {digest}")
    return 0


def estimate_command(req: Request, stride: int) -> int:
    """`hspZ hits-estimate`: the exact seed hits of every unit, by histogram dot products."""
    t0 = time.perf_counter()
    ref, qry = read_both(req.reference, req.query)
    m = load_manifest(req, ref, qry)
    if m is not None:
        ctx, p = context_of(m), m.plan
    else:
        ctx = Context(req.options, SeedShape.from_pattern(req.options.pattern),
                      np.zeros((8, 8), np.int32))
        p = make_plan(req.options, ref, qry)
    if req.dump_plan:
        from hspz import report

        report.write_plan(req.dump_plan, Inputs(ref, qry, p))
    rows, times = estimate_rows(ctx, p, ref, qry, stride)
    sys.stdout.write("".join("\t".join(str(x) for x in row) + "\n" for row in rows))
    me = estimate_peak_mib()
    say(f"hits-estimate: R={len(p.ref_bins)} Q={len(p.query_bins)} stride={stride} "
        f"threads={req.options.threads or os.cpu_count()} query_s={times[0]:.3f} "
        f"reference_s={times[1]:.3f} total_s={time.perf_counter() - t0:.3f} "
        f"peak_rss_mib={me:.0f}")
    return 0


def estimate_rows(ctx: Context, p: planning.Plan, ref: list[Record], qry: list[Record],
                  stride: int) -> tuple[list[tuple[int, ...]], list[float]]:
    """(ref_bin, query_bin, ref_bp, query_bp, hits) per unit, in ordinal order, and the wall
    seconds of the query and reference stages.  Bins run on `--threads` threads (the histogram
    passes release the GIL); one reference histogram per thread is alive at a time."""
    threads = ctx.options.threads or os.cpu_count() or 1
    ref_bp = planning.bin_bp(p.ref_bins, [len(r) for r in ref])
    qry_bp = planning.bin_bp(p.query_bins, [len(r) for r in qry])

    def query_side(members: tuple[int, ...]) -> np.ndarray:
        return estimate.query_histogram(ctx, [qry[i] for i in members], stride)

    def reference_side(r: int) -> list[tuple[int, ...]]:
        hist = estimate.reference_histogram([ref[i] for i in p.ref_bins[r]], ctx.shape,
                                            ctx.options.step)
        return [(r, q, ref_bp[r], qry_bp[q], estimate.unit_hits(hist, f) * stride)
                for q, f in enumerate(folded)]

    with ThreadPoolExecutor(max_workers=threads) as pool:
        t = time.perf_counter()
        folded = list(pool.map(query_side, p.query_bins))
        t1 = time.perf_counter()
        rows = [row for part in pool.map(reference_side, range(len(p.ref_bins))) for row in part]
    return rows, [t1 - t, time.perf_counter() - t1]


def estimate_peak_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
