"""Reports: `--time` (phase table, `lifecycle:`, peak RSS, the unit ledger and each
worker's finish and busy times), `--hit-stats`, `--dump-plan`, `--dump-raw`, `--cpu-only`.

Everything here goes to stderr except the files it is asked to write; nothing here decides what
is computed.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

from hspz.core import durable
from hspz.core.durable import write_text
from hspz.stages.segments import format_raw

if TYPE_CHECKING:
    from hspz.core.options import Options
    from hspz.engine.contract import UnitResult
    from hspz.formats.manifest import Manifest
    from hspz.formats.planfile import PlanJob
    from hspz.planning.estimate import HitHistogram
    from hspz.planning.inputs import Inputs
    from hspz.run.summary import Summary
    from hspz.run.worker import WorkerReport

# `gpu_ms` is the engine's time of a unit on either backend (`UnitResult.engine_ms`): the column
# keeps the name docs/report-lines.md gives it, which ledgers already written and their readers
# (`hspZ dotplot --ledger`, benchmarks/) use
LEDGER_COLUMNS = (
    "ordinal",
    "worker",
    "device",
    "ref_bin",
    "query_bin",
    "ref_bp",
    "query_bp",
    "gpu_ms",
    "host_start_ms",
    "host_end_ms",
    "seeds",
    "hits",
    "raw_hsps",
    "hsps",
)


def say(lines: str | Iterable[str] | None) -> None:
    """Print a line, or each of a list of lines, to stderr (None: nothing; the one `say`)."""
    if lines is None:
        return
    for line in [lines] if isinstance(lines, str) else lines:
        print(line, file=sys.stderr)


def write_plan(path: str, source: Manifest | Inputs, options: Options | None = None) -> None:
    """`reference|query<TAB>bin<TAB>name<TAB>bp` per record, reference first, unprefixed.
    `source` is a Manifest (names and lengths) or an `Inputs` (records)."""
    sides: tuple[tuple[str, Any, Sequence[str], Sequence[int]], ...]
    if hasattr(source, "ref_names"):
        m = cast("Manifest", source)
        sides = (
            ("reference", m.plan.ref_bins, m.ref_names, m.ref_lengths),
            ("query", m.plan.query_bins, m.qry_names, m.qry_lengths),
        )
    else:
        sides = tuple(
            (side, bins, [r.name for r in recs], [len(r) for r in recs])
            for side, bins, recs in (
                ("reference", source.plan.ref_bins, source.reference),
                ("query", source.plan.query_bins, source.query),
            )
        )
    rows = [
        f"{side}\t{b}\t{names[i]}\t{lengths[i]}\n"
        for side, bins, names, lengths in sides
        for b, members in enumerate(bins)
        for i in members
    ]
    write_text(path, "".join(rows), "--dump-plan")


def write_raw(path: str | Path, results: Iterable[UnitResult]) -> None:
    """Every pre-dedup HSP of `results` in ordinal order: `strand ref_start query_start len
    score`, block-relative, 0-based; synced.  Written where it is told: the emitter stages the
    file and publishes it with the segments files."""
    parts = [
        format_raw(h, strand)
        for result in sorted(results, key=lambda r: r.ordinal)
        for strand, h in result.raw
    ]
    durable.write_new(path, b"".join(parts))


def peak_rss_mib() -> float:
    """This process's peak resident set size in MiB (`workers.peak_rss_kib`)."""
    from hspz.run.libc import peak_rss_kib

    return peak_rss_kib() / 1024


def time_lines(summary: Summary, wall_s: float) -> list[str]:
    """The phase table: main-process phases against wall time, then worker phases summed over
    workers (they overlap in time when there are several)."""
    lines = [f"time: {'phase':<28} {'seconds':>9} {'% wall':>7}"]
    for phase, seconds in summary.phases.items():
        lines.append(f"time: {phase:<28} {seconds:>9.3f} {seconds / max(wall_s, 1e-9):>6.1%}")
    lines.append(f"time: {'wall':<28} {wall_s:>9.3f} {1:>6.1%}")
    summed: dict[str, float] = {}
    for rep in summary.reports:
        for phase, seconds in rep.phases.items():
            summed[phase] = summed.get(phase, 0.0) + seconds
    for phase, seconds in summed.items():
        lines.append(
            f"time: {'workers: ' + phase:<28} {seconds:>9.3f}  (summed over "
            f"{len(summary.reports)} worker(s))"
        )
    lines += thread_phase_lines(summary.reports)
    me = peak_rss_mib()  # the workers report their own peaks
    worst = max([me] + [r.peak_rss_kib / 1024 for r in summary.reports])
    lines.append(f"time: peak RSS {me:.1f} MiB (main), {worst:.1f} MiB (largest process)")
    est = getattr(summary, "memory", None)
    if est is not None:  # the CPU preflight's estimate of the same two numbers
        lines.append(
            f"time: memory estimate {est.main / 2**20:.1f} MiB (main), "
            f"{max(est.main, est.worker) / 2**20:.1f} MiB (largest process), "
            f"{est.total / 2**20:.1f} MiB in all"
        )
    return lines


def thread_phase_lines(reports: Iterable[WorkerReport]) -> list[str]:
    """The CPU engine's phases (seed, first pass, sweep, gate, dedup): wall seconds summed
    over every worker's threads, the CPU seconds of the same, then each thread's wall/CPU."""
    lines = []
    phases: dict[str, list[tuple[float, float]]] = {}
    for rep in reports:
        for phase, threads in getattr(rep, "thread_phases", {}).items():
            phases.setdefault(phase, []).extend(threads)
    for phase, threads in phases.items():
        wall, cpu = sum(t[0] for t in threads), sum(t[1] for t in threads)
        each = " ".join(f"{w:.2f}/{c:.2f}" for w, c in threads)
        lines.append(
            f"time: {'engine: ' + phase:<28} {wall:>9.3f}  (cpu {cpu:.3f}; per "
            f"thread wall/cpu {each})"
        )
    return lines


def lifecycle_line(summary: Summary) -> str:
    """`lifecycle:` ref bins, work units, builds, uploads, query swaps."""
    reps, m = summary.reports, summary.manifest
    assert m is not None and summary.schedule is not None  # set once the run is planned
    loads = sum(r.loads for r in reps)
    units = sum(v.units for vs in summary.schedule.visits for v in vs)
    return (
        f"lifecycle: {len(m.plan.ref_bins)} ref bins, {units} work units, "
        f"{sum(r.builds for r in reps)} builds, "
        + (f"{loads} loads, " if loads else "")
        + f"{sum(r.uploads for r in reps)} uploads, "
        f"{sum(r.query_swaps for r in reps)} query swaps"
    )


def ledger_lines(summary: Summary) -> list[str]:
    """The unit ledger in ordinal order (a query-list run: by job, then ordinal, with a job column
    first), then each worker's finish and busy times."""
    columns = (("job",) if summary.query_list else ()) + LEDGER_COLUMNS
    lines = ["unit ledger:\t" + "\t".join(columns)]
    for row in sorted(summary.ledger, key=lambda r: (r["job"], r["ordinal"])):
        cells = []
        for c in columns:
            v = row[c]
            cells.append(
                f"{v:.3f}" if c == "gpu_ms" else f"{v:.2f}" if c.endswith("_ms") else str(v)
            )
        lines.append("unit ledger:\t" + "\t".join(cells))
    for rep in summary.reports:
        lines.append(
            f"unit ledger: worker {rep.worker} finished at {rep.finished_ms:.2f} ms, "
            f"busy {rep.busy_ms:.2f} ms ({rep.units} units)"
        )
    return lines


def write_ledger(path: str, summary: Summary) -> None:
    """The unit ledger as a TSV file (`merge --ledger`; the workflow's report reads it): a job
    column (the query-list job's number, 000001, ...; 000000 for a single query), then the
    ledger's, one row per unit by job and ordinal."""
    columns = ("job",) + LEDGER_COLUMNS
    rows = sorted(summary.ledger, key=lambda r: (r["job"], r["ordinal"]))
    text = "".join(
        "\t".join(f"{r['job']:06d}" if c == "job" else str(r[c]) for c in columns) + "\n"
        for r in rows
    )
    write_text(path, "\t".join(columns) + "\n" + text, "--ledger")


def print_query_list(
    summary: Summary, planned: Sequence[PlanJob], wall_s: float, stream: TextIO | None = None
) -> None:
    """`--time` in query-list mode: one `job` line per job (its units, hits, HSPs, when its first
    unit started and its last ended), then the `batch:` line."""
    stream = stream or sys.stderr
    rows: dict[int, list[dict]] = {}
    for row in summary.ledger:
        rows.setdefault(row["job"], []).append(row)
    for p in planned:
        units = rows.get(p.number, [])
        first = min((r["host_start_ms"] for r in units), default=0.0)
        last = max((r["host_end_ms"] for r in units), default=0.0)
        print(
            f"job {p.name}: units={len(units)} seeds={sum(r['seeds'] for r in units)} "
            f"hits={sum(r['hits'] for r in units)} hsps={sum(r['hsps'] for r in units)} "
            f"first_unit_ms={first:.2f} last_unit_ms={last:.2f} path={p.path}",
            file=stream,
        )
    reps = summary.reports
    assert summary.manifest is not None  # set once the query-list run is planned
    print(
        f"batch: {len(planned)} jobs, {len(summary.ledger)} units, "
        f"{len(summary.manifest.plan.ref_bins)} ref bins, {sum(r.builds for r in reps)} "
        f"builds, {sum(r.loads for r in reps)} loads, wall {wall_s:.3f} s, "
        f"{wall_s / max(len(planned), 1):.3f} s per job",
        file=stream,
    )


def print_time(summary: Summary, wall_s: float, stream: TextIO | None = None) -> None:
    for line in time_lines(summary, wall_s) + [lifecycle_line(summary)] + ledger_lines(summary):
        print(line, file=stream or sys.stderr)


def print_hit_stats(hist: HitHistogram, stream: TextIO | None = None) -> None:
    for line in hist.report():
        print(line, file=stream or sys.stderr)
