"""Wall time against input size, log-log, from benchmarks/run.py's JSON records (and their table).

    python benchmarks/plot.py RECORDS.jsonl [RECORDS.jsonl ...] [-o FILE.png] [--x hits|bp2]
        [--sessions latest|all] [--table] [--threads FILE.png]

One line per arm and machine (hspZ GPU, hspZ CPU, LASTZ, ...), one point per workload: the
median wall of that arm's runs, with a bar from the fastest to the slowest run.  The x axis is
the pair's seed hits (`hits`, the default: the work both programs scale with; taken from the hspZ
records of the same workload, so LASTZ points need an hspZ arm of that workload somewhere in the
records) or reference bp x query bp (`bp2`; real bacterial pairs have about 4x the hit density of
the simulated mammal-like ones, so sizes in bp order the workloads differently).
Where one arm on one machine ran a workload in several runner sessions, the latest session's runs
are drawn (`--sessions all` pools them: a measurement split over two device calls).  Records
from several files combine: the dev machine's CPU and LASTZ runs and a device's GPU runs land on
one figure.  `--table` prints the same points as a Markdown table (median, every run, engine
time per seed hit, load).  `plot` returns, and tests read, the points drawn.

`--threads FILE.png` draws the CPU backend's thread scaling instead (`run.py --sweep`): per
workload, machine and hspZ version, the speed-up of `-t K` over that version's `-t 1` against K
(median walls), the ideal line, and prints its table: wall, engine, peak RSS, the preflight's
estimate and peak / estimate per K (`thread_table`, `thread_points`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

MARKERS = {"hspz-gpu": "s", "hspz-cpu": "o", "lastz": "^", "lastz-pieces": "v"}


def load_records(paths: list[Path]) -> list[dict]:
    """Every record of run.py's JSON-lines files, in file order."""
    records = []
    for path in paths:
        with open(path) as fh:
            records += [json.loads(line) for line in fh if line.strip()]
    return records


def _size(rec: dict, hits: dict[str, int], x: str) -> float | None:
    if x == "bp2":
        return float(rec["ref_bp"]) * float(rec["query_bp"])
    return float(hits[rec["workload"]]) if rec["workload"] in hits else None


def points(records: list[dict], x: str = "hits", sessions: str = "latest") -> dict[str, list[dict]]:
    """Per series ("arm (machine)"), its points sorted by size: size, workload, median wall,
    every run's wall, fastest and slowest, arm kind, median engine ns per seed hit (hspZ), the
    1-minute load averages before the runs."""
    hits = {r["workload"]: r["seed_hits"] for r in records if r.get("seed_hits")}
    latest: dict[tuple, str] = {}
    for r in records:
        key = (r["machine"], r["arm"], r["workload"])
        latest[key] = max(latest.get(key, ""), r["session"])
    runs: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        key = (r["machine"], r["arm"], r["workload"])
        if sessions == "all" or r["session"] == latest[key]:
            runs[key].append(r)
    series: dict[str, list[dict]] = defaultdict(list)
    for (machine, arm, _), rs in runs.items():
        size = _size(rs[0], hits, x)
        if size is not None:
            series[f"{arm} ({machine})"].append(_point(rs, size))
    return {name: sorted(ps, key=lambda p: p["size"]) for name, ps in sorted(series.items())}


def _point(rs: list[dict], size: float) -> dict:
    walls = [r["wall_s"] for r in rs]
    hits = rs[0].get("seed_hits")
    engine = statistics.median(r.get("engine_s", 0.0) for r in rs)
    return dict(
        size=size,
        workload=rs[0]["workload"],
        wall_s=statistics.median(walls),
        walls=walls,
        fastest=min(walls),
        slowest=max(walls),
        kind=rs[0]["kind"],
        ns_per_hit=engine * 1e9 / hits if hits else None,
        loads=[r["loadavg"][0] for r in rs],
    )


def table(drawn: dict[str, list[dict]]) -> str:
    """The points as a Markdown table, one row per series and workload."""
    rows = [
        "| arm (machine) | workload | wall s (median) | all runs | engine ns/hit | "
        "load before runs |",
        "|---|---|---|---|---|---|",
    ]
    for name, ps in drawn.items():
        for p in ps:
            nsph = f"{p['ns_per_hit']:.4g}" if p["ns_per_hit"] else "-"
            rows.append(
                f"| {name} | {p['workload']} | {p['wall_s']:.2f} | "
                f"{' '.join(f'{w:.2f}' for w in p['walls'])} | {nsph} | "
                f"{min(p['loads']):.2f}-{max(p['loads']):.2f} |"
            )
    return "\n".join(rows)


def plot(
    records: list[dict],
    path: Path,
    x: str = "hits",
    title: str | None = None,
    sessions: str = "latest",
) -> dict:
    """Draw `points(records, x, sessions)` into the PNG `path`; returns the points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drawn = points(records, x, sessions)
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=100)
    for name, ps in drawn.items():
        sizes = [p["size"] for p in ps]
        walls = [p["wall_s"] for p in ps]
        bars = [[p["wall_s"] - p["fastest"] for p in ps], [p["slowest"] - p["wall_s"] for p in ps]]
        ax.errorbar(
            sizes, walls, yerr=bars, marker=MARKERS.get(ps[0]["kind"], "x"), capsize=3, label=name
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("reference bp x query bp" if x == "bp2" else "seed hits (both strands)")
    ax.set_ylabel("wall time, s (median; bar: fastest to slowest run)")
    ax.set_title(title or "hspZ and LASTZ: wall time against input size")
    ax.grid(True, which="both", alpha=0.3)
    _name_workloads(ax, drawn)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return drawn


def _name_workloads(ax, drawn: dict[str, list[dict]]) -> None:
    """Each workload's name on a top axis, above its size."""
    at = {p["workload"]: p["size"] for ps in drawn.values() for p in ps}
    top = ax.secondary_xaxis("top")
    top.set_xticks(
        sorted(at.values()), [n for n, _ in sorted(at.items(), key=lambda kv: kv[1])], fontsize=8
    )
    top.minorticks_off()


def thread_points(records: list[dict]) -> dict[str, list[dict]]:
    """Per series ("workload, version (machine)") of CPU runs, one point per thread count:
    threads, median wall and engine, every wall, peak RSS (largest), the estimate, speed-up
    over the series' one-thread median, loads."""
    runs: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        if r.get("kind") == "hspz-cpu":
            version = (
                "alt " + (r.get("alt_commit") or Path(r["alt"]).name)
                if r.get("alt")
                else r.get("commit") or "this"
            )
            runs[(r["workload"], version, r["machine"], r["threads"])].append(r)
    series: dict[str, list[dict]] = defaultdict(list)
    for (workload, version, machine, threads), rs in sorted(runs.items()):
        walls = [r["wall_s"] for r in rs]
        est = rs[-1].get("estimate_mib")
        series[f"{workload}, {version} ({machine})"].append(
            dict(
                threads=threads,
                wall_s=statistics.median(walls),
                walls=walls,
                engine_s=statistics.median(r.get("engine_s", 0.0) for r in rs),
                peak_mib=max(r["peak_rss_mib"] for r in rs),
                estimate_mib=est,
                loads=[r["loadavg"][0] for r in rs],
            )
        )
    for ps in series.values():
        one = next((p["wall_s"] for p in ps if p["threads"] == 1), None)
        for p in ps:
            p["speedup"] = one / p["wall_s"] if one else None
    return dict(series)


def thread_table(drawn: dict[str, list[dict]]) -> str:
    """`thread_points` as a Markdown table."""
    rows = [
        "| workload, version (machine) | -t | wall s (median) | all runs | engine s | "
        "speed-up vs -t 1 | peak RSS MiB | estimate MiB | peak / estimate | load |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, ps in drawn.items():
        for p in ps:
            est = p["estimate_mib"]
            rows.append(
                f"| {name} | {p['threads']} | {p['wall_s']:.2f} | "
                f"{' '.join(f'{w:.2f}' for w in p['walls'])} | {p['engine_s']:.2f} | "
                + (f"{p['speedup']:.2f}x" if p["speedup"] else "-")
                + f" | {p['peak_mib']:.0f} | {est if est else '-'} | "
                + (f"{p['peak_mib'] / est:.2f}" if est else "-")
                + f" | {min(p['loads']):.2f}-{max(p['loads']):.2f} |"
            )
    return "\n".join(rows)


def plot_threads(records: list[dict], path: Path, title: str | None = None) -> dict:
    """Speed-up against threads (log2 axes) into the PNG `path`; returns `thread_points`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drawn = thread_points(records)
    fig, ax = plt.subplots(figsize=(7, 5), dpi=100)
    most = 1
    for name, ps in drawn.items():
        ps = [p for p in ps if p["speedup"]]
        if ps:
            ax.plot([p["threads"] for p in ps], [p["speedup"] for p in ps], marker="o", label=name)
            most = max(most, max(p["threads"] for p in ps))
    ax.plot([1, most], [1, most], "k--", alpha=0.4, label="ideal")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("--threads")
    ax.set_ylabel("speed-up over the same code's -t 1 (median wall)")
    ax.set_title(title or "hspZ CPU backend: thread scaling")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return drawn


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", nargs="+", type=Path)
    ap.add_argument("-o", "--output", type=Path, help="the PNG to write")
    ap.add_argument("--x", choices=("hits", "bp2"), default="hits")
    ap.add_argument("--sessions", choices=("latest", "all"), default="latest")
    ap.add_argument("--table", action="store_true", help="print the points as a Markdown table")
    ap.add_argument("--title")
    ap.add_argument(
        "--threads",
        type=Path,
        metavar="FILE.png",
        help="draw the CPU thread scaling and print its table",
    )
    a = ap.parse_args(argv)
    if a.threads:
        drawn = plot_threads(load_records(a.records), a.threads, a.title)
        print(f"plot: {a.threads}")
        print(thread_table(drawn))
        return 0
    if not (a.output or a.table):
        ap.error("nothing to do: give -o FILE.png and/or --table")
    records = load_records(a.records)
    if a.output:
        plot(records, a.output, a.x, a.title, a.sessions)
        print(f"plot: {a.output}")
    if a.table:
        print(table(points(records, a.x, a.sessions)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
