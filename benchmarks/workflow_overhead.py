"""The workflow's overhead: one batch through Snakemake (index -> plan -> work -> merge, the
local profile) against the same batch in one process (`hspZ index`, then `hspZ run --index
--query-list`), each from a fresh folder, interleaved, with the outputs checked equal:

    python benchmarks/workflow_overhead.py --work DIR --out OUT [--runs 3] [--workers 1]
        [--reference REF --queries LIST] [--backend auto] [-B 500M] [--rerun] [--report]
        [--baseline CHECKOUT]

--rerun also times a second `snakemake` in each workflow folder, with nothing to do (the
workflow's fixed cost: Snakemake's start, parsing, the config and sheet checks, the DAG), and
every workflow run's per-rule seconds (from Snakemake's log: each job's start to its
`Finished`, one-second stamps) go into the record. --report adds the summary
and dot plots to the workflow arm (report: true). --baseline adds a third arm, interleaved
with the others: the workflow/ and profiles/ of another checkout (e.g. `git worktree add
/tmp/base main`), for a before/after of a workflow change in one command. --stamps runs every
hspZ process of both arms through a wrapper that stamps its start and end (the epoch, from the
shell), so each record also holds each process's wall and, for the workflow, the seconds
between them: Snakemake's start before the first job, its gaps between jobs (the merge rule's
manifest scripts among them) and its end after the last; the summary gives their medians.

By default REF and LIST are DIR/ref.2bit and DIR/list.txt (what benchmarks/index_batch.py
generates); on the dev machine the demo's sheet does: --reference demo/reference.fa.gz
--queries config/queries.tsv -B 150K.  Snakemake and hspZ must be on PATH.  One JSON record per
run goes to OUT/workflow_overhead.jsonl; the summary compares the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


STAMPER = """#!/bin/sh
s=$(date +%s.%N)
{hspz} "$@"
rc=$?
[ -n "${{HSPZ_STAMPS:-}}" ] && echo "${{1:-none}} $s $(date +%s.%N)" >> "$HSPZ_STAMPS"
exit $rc
"""


def install_stamper(folder: Path) -> None:
    """An `hspZ` in `folder`, put first on PATH, that runs the real one and appends "COMMAND
    START END" (epoch seconds) to $HSPZ_STAMPS, where that is set."""
    real = shutil.which("hspZ")
    if real is None:
        raise SystemExit("workflow_overhead.py: --stamps needs hspZ on PATH")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hspZ").write_text(STAMPER.format(hspz=shlex.quote(real)))
    (folder / "hspZ").chmod(0o755)
    os.environ["PATH"] = f"{folder}{os.pathsep}{os.environ['PATH']}"


def stamped(stamps: Path, start: float, end: float) -> dict[str, float]:
    """Each hspZ process's wall (`index`, `plan`, `work`, `merge`, `run`; the second run of a
    command is `work#2`), in the order they started, and the seconds no process ran: `before`
    the first, `gap N` before the Nth after it (0 where it started before the ones before it
    had all ended: parallel jobs), `after` the last, from the arm's own start and end."""
    rows = []
    for line in stamps.read_text().splitlines():
        command, a, b = line.rsplit(" ", 2)
        rows.append((float(a), float(b), command))
    out: dict[str, float] = {}
    seen: dict[str, int] = {}
    ended = start
    for n, (a, b, command) in enumerate(sorted(rows)):
        out["before" if n == 0 else f"gap {n}"] = round(max(a - ended, 0.0), 3)
        seen[command] = seen.get(command, 0) + 1
        out[command if seen[command] == 1 else f"{command}#{seen[command]}"] = round(b - a, 3)
        ended = max(ended, b)
    out["after"] = round(end - ended, 3)
    return out


SPANS: list[tuple[float, float]] = []  # each `timed` command's epoch start and end


def timed(cmd: list[str], cwd: Path, log: Path) -> float:
    SPANS.append((time.time(), 0.0))
    t = time.perf_counter()
    with open(log, "w") as out:
        done = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode:
        print(log.read_text()[-3000:], file=sys.stderr)
        raise SystemExit(f"failed ({done.returncode}): {' '.join(cmd)}")
    SPANS[-1] = (SPANS[-1][0], time.time())
    return time.perf_counter() - t


def queries_of(listing: Path) -> list[str]:
    """The query paths of a list file or (a .tsv) a sheet, absolute."""
    lines = [line.strip() for line in listing.read_text().splitlines()]
    if listing.suffix == ".tsv":
        lines = [line.split("\t")[1] for line in lines[1:] if line]
    return [str((listing.parent / p).resolve()) for p in lines if p and not p.startswith("#")]


def tree(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name not in ("names.tsv", ".snakemake_timestamp")
    }


def workflow_run(
    a, k: int, queries: list[str], root: Path = ROOT, arm: str = "wf"
) -> tuple[float, Path]:
    wd = a.work / f"{arm}-{k}"
    shutil.rmtree(wd, ignore_errors=True)
    wd.mkdir(parents=True)
    (wd / "list.txt").write_text("".join(f"{q}\n" for q in queries))
    job = dict(
        name="batch",
        reference=str(Path(a.reference).resolve()),
        query_list=str(wd / "list.txt"),
        workers=a.workers,
        backend=a.backend,
        threads=a.threads,
        index=True,
        report=a.report,
        options=dict(seq_block_size=a.B),
    )
    (wd / "config.yaml").write_text(yaml.safe_dump({"jobs": [job]}))
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(root / "workflow" / "Snakefile"),
        "--directory",
        str(wd),
        "--configfile",
        str(wd / "config.yaml"),
        "--profile",
        str(root / "profiles" / "local"),
        "--cores",
        "all",
        "--resources",
        f"gpu={a.gpus}",
    ]
    wall = timed(cmd, wd, a.out / f"{arm}-{k}.log")
    os.environ["HSPZ_STAMPS"] = os.devnull  # the rerun's, if any (it runs none)
    if a.rerun:
        a.extra = dict(
            rerun_s=round(timed(cmd, wd, a.out / f"{arm}-{k}-rerun.log"), 3),
            rules=rule_walls(a.out / f"{arm}-{k}.log"),
        )
    return wall, wd / "results" / "batch"


def rule_walls(log: Path) -> dict[str, float]:
    """Seconds each rule's jobs took, summed, from Snakemake's own log: each job's start
    (the time stamp before `rule NAME:`, its `jobid: N`) to its `Finished jobid: N`."""
    import re
    from datetime import datetime

    stamp, started, rules, out = None, {}, {}, {}
    for line in log.read_text().splitlines():
        if m := re.match(r"^\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]$", line):
            stamp = datetime.strptime(m[1], "%a %b %d %H:%M:%S %Y").timestamp()
        elif m := re.match(r"^(?:local)?(?:rule|checkpoint) (\w+):$", line):
            rule = m[1]
        elif (m := re.match(r"^ +jobid: (\d+)$", line)) and stamp is not None:
            started[m[1]], rules[m[1]] = stamp, rule
        elif (m := re.match(r"^Finished jobid: (\d+)", line)) and m[1] in started:
            name = rules[m[1]]
            out[name] = round(out.get(name, 0.0) + stamp - started.pop(m[1]), 1)
    return out


def baseline_run(a, k: int, queries: list[str]) -> tuple[float, Path]:
    return workflow_run(a, k, queries, a.baseline, "base")


def process_run(a, k: int, queries: list[str]) -> tuple[float, Path]:
    wd = a.work / f"run-{k}"
    shutil.rmtree(wd, ignore_errors=True)
    wd.mkdir(parents=True)
    (wd / "list.txt").write_text("".join(f"{q}\n" for q in queries))
    t = timed(
        [
            "hspZ",
            "index",
            "-r",
            a.reference,
            "--index",
            str(wd / "ix"),
            "-B",
            a.B,
            "--backend",
            a.backend,
            "--threads",
            str(a.threads),
        ],
        wd,
        a.out / f"ix-{k}.log",
    )
    t += timed(
        [
            "hspZ",
            "run",
            "--index",
            str(wd / "ix"),
            "-r",
            a.reference,
            "--query-list",
            str(wd / "list.txt"),
            "-o",
            str(wd / "out"),
            "-B",
            a.B,
            "--backend",
            a.backend,
            "--gpus",
            str(a.workers),
            "-t",
            str(a.threads),
        ],
        wd,
        a.out / f"run-{k}.log",
    )
    return t, wd / "out"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--reference")
    p.add_argument("--queries", type=Path)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--gpus", type=int, default=1, help="the local profile's gpu resource")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--backend", default="auto")
    p.add_argument("-B", default="500M")
    p.add_argument("--rerun", action="store_true", help="time a rerun with nothing to do")
    p.add_argument("--report", action="store_true", help="the workflow arm makes its report")
    p.add_argument("--baseline", type=Path, help="another checkout's workflow, a third arm")
    p.add_argument("--stamps", action="store_true", help="each hspZ process's wall and the gaps")
    a = p.parse_args()
    a.extra = {}
    a.reference = str(Path(a.reference).resolve()) if a.reference else str(a.work / "ref.2bit")
    queries = queries_of(a.queries or a.work / "list.txt")
    a.threads = a.threads or os.cpu_count()
    a.out.mkdir(parents=True, exist_ok=True)
    arms = [("workflow", workflow_run), ("run", process_run)]
    if a.baseline:
        a.baseline = a.baseline.resolve()
        arms.insert(1, ("baseline", baseline_run))
    walls: dict[str, list[float]] = {arm: [] for arm, _ in arms}
    parts: dict[str, list[dict[str, float]]] = {arm: [] for arm, _ in arms}
    if a.stamps:
        install_stamper(a.out / "stamper")
    for k in range(a.runs):
        for arm, fn in arms:
            stamps = a.out / f"stamps-{arm}-{k}.txt"
            stamps.unlink(missing_ok=True)  # an earlier call's, with the same --out
            os.environ["HSPZ_STAMPS"] = str(stamps)
            SPANS.clear()
            wall, results = fn(a, k, queries)
            walls[arm].append(wall)
            if a.stamps:  # the arm's own span: the workflow's first snakemake, or both commands
                end = SPANS[-1][1] if arm == "run" else SPANS[0][1]
                parts[arm].append(stamped(stamps, SPANS[0][0], end))
            record = dict(
                arm=arm,
                run=k,
                wall_s=round(wall, 3),
                queries=len(queries),
                files=len(tree(results)),
                **(a.extra if arm != "run" else {}),
                **({"stamps": parts[arm][-1]} if a.stamps else {}),
            )
            a.extra = {}
            with open(a.out / "workflow_overhead.jsonl", "a") as fh:
                fh.write(json.dumps(record) + "\n")
            print(json.dumps(record), flush=True)
        for folder in ("wf", "base") if a.baseline else ("wf",):
            same = tree(a.work / f"{folder}-{k}" / "results" / "batch") == tree(
                a.work / f"run-{k}" / "out"
            )
            print(f"run {k}: {folder} results equal run --query-list's: {same}", flush=True)
            if not same:
                raise SystemExit("the workflow's results differ from run --query-list's")
    wf, run = (statistics.median(walls[x]) for x in ("workflow", "run"))
    line = (
        f"workflow_overhead: {len(queries)} queries, workers {a.workers}: workflow median "
        f"{wf:.2f} s (all {' '.join(f'{w:.2f}' for w in walls['workflow'])}), index + run "
        f"--query-list median {run:.2f} s (all {' '.join(f'{w:.2f}' for w in walls['run'])})"
        f", overhead {wf - run:+.2f} s ({(wf / run - 1) * 100:+.1f}%)"
    )
    if a.baseline:
        base = statistics.median(walls["baseline"])
        line += (
            f"; baseline {a.baseline} median {base:.2f} s (all "
            f"{' '.join(f'{w:.2f}' for w in walls['baseline'])}), overhead "
            f"{base - run:+.2f} s ({(base / run - 1) * 100:+.1f}%)"
        )
    print(line, flush=True)
    for arm, rows in parts.items() if a.stamps else ():
        keys = [key for key in rows[0] if all(key in row for row in rows)]
        line += f"\n  {arm}, medians of {len(rows)} (s): " + ", ".join(
            f"{key} {statistics.median(row[key] for row in rows):.3f}" for key in keys
        )
        print(line.splitlines()[-1], flush=True)
    with open(a.out / "summary.txt", "a") as fh:
        fh.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
