"""Wall time against input size, log-log, from benchmarks/run.py's JSON records.

    python benchmarks/plot.py RECORDS.jsonl [RECORDS.jsonl ...] -o FILE.png [--x bp2|hits]

One line per arm and machine (hspZ GPU, hspZ CPU, LASTZ, ...), one point per workload: the
median wall of that arm's runs, with a bar from the fastest to the slowest run.  The x axis is
reference bp x query bp (`bp2`) or the pair's seed hits (`hits`, taken from the hspZ records of
the same workload, so LASTZ points need an hspZ arm of that workload somewhere in the records).
Where one arm on one machine ran a workload in several runner sessions, the latest session's runs
are drawn.  Records from several files combine: the dev machine's CPU and LASTZ runs and a
device's GPU runs land on one figure.  Returns, and tests read, the points drawn.
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


def points(records: list[dict], x: str = "bp2") -> dict[str, list[dict]]:
    """Per series ("arm (machine)"), its points sorted by size: size, workload, median wall,
    fastest and slowest run, number of runs, arm kind."""
    hits = {r["workload"]: r["seed_hits"] for r in records if r.get("seed_hits")}
    latest: dict[tuple, str] = {}
    for r in records:
        key = (r["machine"], r["arm"], r["workload"])
        latest[key] = max(latest.get(key, ""), r["session"])
    runs: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        if r["session"] == latest[(r["machine"], r["arm"], r["workload"])]:
            runs[(r["machine"], r["arm"], r["workload"])].append(r)
    series: dict[str, list[dict]] = defaultdict(list)
    for (machine, arm, workload), rs in runs.items():
        size = _size(rs[0], hits, x)
        if size is None:
            continue
        walls = [r["wall_s"] for r in rs]
        series[f"{arm} ({machine})"].append(
            dict(size=size, workload=workload, wall_s=statistics.median(walls), fastest=min(walls),
                 slowest=max(walls), runs=len(walls), kind=rs[0]["kind"]))
    return {name: sorted(ps, key=lambda p: p["size"]) for name, ps in sorted(series.items())}


def plot(records: list[dict], path: Path, x: str = "bp2", title: str | None = None) -> dict:
    """Draw `points(records, x)` into the PNG `path`; returns the points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drawn = points(records, x)
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=100)
    for name, ps in drawn.items():
        sizes = [p["size"] for p in ps]
        walls = [p["wall_s"] for p in ps]
        bars = [[p["wall_s"] - p["fastest"] for p in ps], [p["slowest"] - p["wall_s"] for p in ps]]
        ax.errorbar(sizes, walls, yerr=bars, marker=MARKERS.get(ps[0]["kind"], "x"), capsize=3,
                    label=name)
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
    top.set_xticks(sorted(at.values()), [n for n, _ in sorted(at.items(), key=lambda kv: kv[1])],
                   fontsize=8)
    top.minorticks_off()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", nargs="+", type=Path)
    ap.add_argument("-o", "--output", type=Path, required=True)
    ap.add_argument("--x", choices=("bp2", "hits"), default="bp2")
    ap.add_argument("--title")
    a = ap.parse_args(argv)
    drawn = plot(load_records(a.records), a.output, a.x, a.title)
    for name, ps in drawn.items():
        print(f"{name}: " + ", ".join(f"{p['workload']} {p['wall_s']:.2f} s" for p in ps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
