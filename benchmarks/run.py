"""Side-by-side runner: hspZ (CPU backend, GPU backend) and `lastz --nogapped` on named workloads.

    python benchmarks/run.py WORKLOAD [WORKLOAD ...] [--repeat 3] [--arms cpu1,cpuN,gpu,lastz,
        lastz-pieces] [--sweep 1,2,4,8,16] [--alt-sweep 1,4,16] [--no-gpu] [--no-lastz]
        [--threads N] [--hspz-args "-B 250M"] [--alt DIR] [--files DIR] [--workdir bench-data]
        [--machine LABEL] [--json FILE] [--plot FILE.png]

Workloads are the names in benchmarks/workloads.toml.  Arms (`--arms`, comma-separated):
  cpuK / cpuN       `hspZ run --backend cpu -t K` (N: --threads, all cores by default)
  gpu / gpuK        `hspZ run --backend gpu --gpus K` (gpu: one GPU), -t --threads
  lastz             `lastz --nogapped` (one core) on plain FASTA copies of the inputs
  lastz-pieces      lastz over the query cut into --threads pieces run in parallel, the way its
                    users parallelise it (HSPs differ slightly at piece boundaries: speed only)
`--alt DIR` adds a twin of every hspZ arm run with the hspz package in DIR (another version,
e.g. `git archive COMMIT hspz | tar -x -C DIR`), side by side in the same rounds.
`--sweep 1,2,4,8,16` replaces the CPU arms by `cpuK` for each K, those above the machine's
cores left out (the thread-scaling sweep); `--alt-sweep` gives the alt twin's own thread counts
(default: the same), so a slow old version can run fewer.

Every run is a separate process timed from outside (wall clock; peak RSS of the child from
wait4).  The runs are interleaved: round i runs every arm once, so a change in the machine's load
falls on every arm alike.  Before the rounds each hspZ backend runs once, untimed, on the
`--warmup` workload (numba's cache, CuPy's kernels), and the inputs are read once (page cache).
hspZ arms must print the same digest, or the runner fails: a fast wrong answer is no result.

Each run appends one JSON record to `--json FILE` as it ends (what a device call cut short still
returns): workload, arm, wall, peak RSS, the input's bp, seed hits, HSPs, digest, engine time and
per-worker busy time from the unit ledger, the `--time` phases (with the CPU engine's per-thread
wall/CPU seconds of seed, first pass, sweep, gate and dedup), the peak RSS `--time` reports and
the preflight's memory estimate (MiB, largest process), the load average before the run,
machine, versions, commit.  `--plot FILE.png` then draws every record in the JSON file
(benchmarks/plot.py: wall against input size, log-log).  The table printed per workload gives
medians of the runs.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.workloads import materialise  # noqa: E402
from hspz.io.fasta import write_fasta  # noqa: E402
from hspz.io.readers import read_records  # noqa: E402
from hspz.io.records import Record  # noqa: E402

LASTZ_FORMAT = "general-:name1,start1,end1,name2,start2,end2,strand2,score"
DEFAULT_ARMS = "cpu1,cpuN,gpu,lastz,lastz-pieces"
VERSIONED = ("hspz", "numpy", "numba", "cupy-cuda13x", "cupy-cuda12x", "matplotlib")


@dataclass(frozen=True)
class Arm:
    """One side of the comparison: how to run it and what to call it."""

    label: str
    kind: str  # hspz-cpu, hspz-gpu, lastz, lastz-pieces
    threads: int | None = None
    gpus: int | None = None
    alt: Path | None = None


def sweep_arms(sweep: str, alt_sweep: str | None, alt: Path | None, cores: int) -> list[Arm]:
    """`--sweep`: one CPU arm per thread count up to `cores`, and the alt twin's (`--alt-sweep`,
    else the same counts), interleaved by thread count."""

    def counts(text: str) -> list[int]:
        return [n for n in (int(t) for t in text.split(",") if t.strip()) if 1 <= n <= cores]

    mine, theirs = counts(sweep), counts(alt_sweep or sweep) if alt else []
    arms = []
    for n in sorted(set(mine) | set(theirs)):
        if n in mine:
            arms.append(Arm(f"hspZ cpu -t {n}", "hspz-cpu", threads=n))
        if n in theirs:
            arms.append(Arm(f"hspZ cpu -t {n} (alt)", "hspz-cpu", threads=n, alt=alt))
    return arms


def parse_arms(text: str, threads: int, alt: Path | None) -> list[Arm]:
    """The arms named in `text` (see the module docstring), each hspZ arm twice with `alt`."""
    arms: list[Arm] = []
    for token in (t.strip() for t in text.split(",") if t.strip()):
        m = re.fullmatch(r"(cpu|gpu)(N|\d+)?|lastz|lastz-pieces", token)
        if not m:
            raise SystemExit(
                f"run.py: unknown arm {token!r} (cpuK, cpuN, gpu, gpuK, lastz, lastz-pieces)"
            )
        if token.startswith("lastz"):
            label = "lastz --nogapped" if token == "lastz" else f"lastz x{threads} query pieces"
            arms.append(Arm(label, token, threads=1 if token == "lastz" else threads))
            continue
        n = threads if m.group(2) in (None, "N") and m.group(1) == "cpu" else int(m.group(2) or 1)
        twins = [None] if alt is None else [None, alt]
        for version in twins:
            suffix = " (alt)" if version else ""
            if m.group(1) == "cpu":
                arms.append(Arm(f"hspZ cpu -t {n}{suffix}", "hspz-cpu", threads=n, alt=version))
            else:
                label = "hspZ gpu" + (f" --gpus {n}" if n != 1 else "") + suffix
                arms.append(Arm(label, "hspz-gpu", threads=threads, gpus=n, alt=version))
    return arms


# A child started straight from this process inherits its peak RSS: Linux keeps the larger of the
# image it replaced (vfork shares this process's memory until exec) and its own.  So each command
# runs under a small Python that forks it from a fresh image and reports the grandchild's peak.
PEAK_RSS = """import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as fh:
    fh.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def timed(
    cmd: list[str], cwd: Path | None = None, env: dict | None = None
) -> tuple[float, int, str]:
    """(wall seconds, peak RSS in KiB of the command and its descendants, combined output)."""
    with tempfile.NamedTemporaryFile(prefix="hspz-rss-") as rss:
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-S", "-c", PEAK_RSS, rss.name, *cmd],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )
        wall = time.perf_counter() - t0
        peak = int(Path(rss.name).read_text() or 0)
    if proc.returncode:
        raise SystemExit(
            f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout.decode()[-2000:]}"
        )
    return wall, peak, proc.stdout.decode(errors="replace")


def hspz_cmd(arm: Arm, ref: Path, qry: Path, out: Path, extra: list[str]) -> list[str]:
    backend = "cpu" if arm.kind == "hspz-cpu" else "gpu"
    cmd = [
        sys.executable,
        "-m",
        "hspz",
        "run",
        "-r",
        str(ref),
        "-q",
        str(qry),
        "-o",
        str(out),
        "--backend",
        backend,
        "-t",
        str(arm.threads),
        "--time",
        *extra,
    ]
    return cmd + (["--gpus", str(arm.gpus)] if arm.gpus else [])


def hspz_place(arm: Arm) -> tuple[Path, dict]:
    """Working directory and environment of an hspZ arm: `python -m hspz` imports the package
    from its working directory first, so an alt arm runs in (and from) its own folder."""
    if arm.alt is None:
        return ROOT, {}
    return arm.alt, {"PYTHONPATH": str(arm.alt)}


def counts(text: str) -> dict:
    """Counts, digest, unit-ledger totals and `--time` phases of one hspZ run's output."""
    got = {
        k.replace(" ", "_").lower(): int(v)
        for k, v in re.findall(r"^#(seeds|seed hits|raw HSPs|HSPs): (\d+)$", text, re.M)
    }
    digest = re.search(r"^digest: (\w+)$", text, re.M)
    ledger = [row.split("\t") for row in text.splitlines() if row.startswith("unit ledger:\t")]
    head, rows = (ledger[0][1:], [r[1:] for r in ledger[1:]]) if ledger else ([], [])
    units = [dict(zip(head, r, strict=True)) for r in rows]
    busy = re.findall(
        r"^unit ledger: worker \d+ finished at [\d.]+ ms, busy ([\d.]+) ms", text, re.M
    )
    phases = dict(re.findall(r"^time: (input|plan|workers|publish|wall) +([\d.]+)", text, re.M))
    engine = {
        name: dict(
            wall=float(wall),
            cpu=float(cpu),
            threads=[[float(x) for x in pair.split("/")] for pair in each.split()],
        )
        for name, wall, cpu, each in re.findall(
            r"^time: engine: (.+?) +([\d.]+)  \(cpu ([\d.]+); per thread wall/cpu (.*)\)$",
            text,
            re.M,
        )
    }
    est = re.search(r"^time: memory estimate .*?, ([\d.]+) MiB \(largest process\)", text, re.M)
    peak = re.search(r"^time: peak RSS .*?, ([\d.]+) MiB \(largest process\)", text, re.M)
    return dict(
        got,
        digest=digest.group(1) if digest else None,
        engine_s=round(sum(float(u["gpu_ms"]) for u in units) / 1e3, 4),
        busy_s=[round(float(b) / 1e3, 3) for b in busy],
        units=len(units),
        first_unit_s=round(min((float(u["host_start_ms"]) for u in units), default=0.0) / 1e3, 3),
        time={k: float(v) for k, v in phases.items()},
        engine_phases=engine,
        estimate_mib=float(est.group(1)) if est else None,
        reported_peak_mib=float(peak.group(1)) if peak else None,
    )


def plain_fasta(path: Path, work: Path) -> Path:
    """LASTZ reads neither gzip nor 2bit-with-long-names reliably: a plain FASTA copy."""
    dst = work / (path.name.split(".")[0] + ".plain.fa")
    if not dst.exists():
        write_fasta(dst, read_records(path))
    return dst


def lastz_cmd(ref: Path, qry: Path) -> list[str]:
    return [
        "lastz",
        f"{ref}[multiple,nameparse=darkspace]",
        f"{qry}[nameparse=darkspace]",
        "--nogapped",
        f"--format={LASTZ_FORMAT}",
    ]


def query_pieces(qry: Path, n: int, work: Path) -> list[Path]:
    """The query cut into n pieces of about equal bp (records split where needed)."""
    records = read_records(qry)
    total = sum(len(r) for r in records)
    size = -(-total // n)
    pieces, current, filled = [], [], 0
    for rec in records:
        start = 0
        while start < len(rec):
            take = min(len(rec) - start, size - filled)
            current.append(Record(f"{rec.name}_{start}", rec.seq[start : start + take]))
            filled += take
            start += take
            if filled == size:
                pieces.append(current)
                current, filled = [], 0
    if current:
        pieces.append(current)
    paths = []
    for i, recs in enumerate(pieces):
        paths.append(work / f"piece{i}.fa")
        write_fasta(paths[-1], recs)
    return paths


def lastz_parallel(ref: Path, pieces: list[Path]) -> tuple[float, int, str]:
    t0 = time.perf_counter()
    with ThreadPoolExecutor(len(pieces)) as pool:
        outs = list(pool.map(lambda p: timed(lastz_cmd(ref, p)), pieces))
    return time.perf_counter() - t0, max(o[1] for o in outs), "".join(o[2] for o in outs)


def lastz_hsps(text: str) -> int:
    return sum(1 for line in text.splitlines() if line and not line.startswith("#"))


def _version(cmd: list[str], any_status: bool = False) -> str | None:
    """The first line a command prints, or None where it fails (`lastz --version` exits 1)."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    ok = out.returncode == 0 or any_status
    return out.stdout.strip().splitlines()[0] if ok and out.stdout.strip() else None


def machine_facts() -> dict:
    """What every record carries about where and with what it ran."""
    versions = {"python": sys.version.split()[0]}
    for name in VERSIONED:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    if shutil.which("lastz"):
        versions["lastz"] = _version(["lastz", "--version"], any_status=True)
    gpu = _version(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
    commit = _version(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
    dirty = _version(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"])
    return dict(
        host=socket.gethostname(),
        cores=os.cpu_count(),
        gpu=gpu,
        versions=versions,
        commit=commit and commit + ("+dirty" if dirty else ""),
    )


class Recorder:
    """Appends one JSON record a run to the --json file (flushed at once) and keeps them."""

    def __init__(self, path: Path | None, base: dict):
        self.path, self.base, self.records = path, base, []

    def add(self, **fields) -> dict:
        rec = {**self.base, **fields}
        self.records.append(rec)
        if self.path:
            with open(self.path, "a") as fh:
                fh.write(json.dumps(rec) + "\n")
        return rec


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def warm_up(arms: list[Arm], name: str, a, work: Path, tmp: Path) -> None:
    """One untimed run of each hspZ backend and version on a small workload: numba compiles its
    cache, CuPy its kernels, before any timed run."""
    files = materialise(name, work, files=a.files)
    seen = set()
    for arm in arms:
        key = (arm.kind, arm.alt)
        if arm.kind.startswith("hspz") and key not in seen:
            seen.add(key)
            once = Arm(arm.label, arm.kind, threads=1, gpus=1 if arm.gpus else None, alt=arm.alt)
            cwd, env = hspz_place(once)
            timed(hspz_cmd(once, files["reference"], files["query"], tmp / "warm", []), cwd, env)


def run_workload(name: str, arms: list[Arm], a, work: Path, tmp: Path, rec: Recorder) -> dict:
    """Every arm `--repeat` times, interleaved; the records of this workload by arm."""
    files = materialise(name, work, files=a.files)
    ref, qry = Path(files["reference"]).resolve(), Path(files["query"]).resolve()
    sizes = {
        side: sum(len(r) for r in read_records(p))
        for side, p in (("ref_bp", ref), ("query_bp", qry))
    }
    extra = shlex.split(a.hspz_args)
    commands = {}
    for arm in arms:
        if arm.kind == "lastz":
            commands[arm] = ("lastz", (plain_fasta(ref, work), plain_fasta(qry, work)))
        elif arm.kind == "lastz-pieces":
            r_fa = plain_fasta(ref, work)
            commands[arm] = (
                "pieces",
                (r_fa, query_pieces(plain_fasta(qry, work), arm.threads, tmp)),
            )
        else:
            commands[arm] = ("hspz", (ref, qry))
    for p in (ref, qry):
        p.read_bytes()  # into the page cache before the first timed run
    if a.warmup != "none":
        warm_threaded(arms, commands, extra, tmp / "out")
    out: dict[Arm, list[dict]] = {arm: [] for arm in arms}
    for i in range(1, a.repeat + 1):
        for arm in arms:
            fields = one_run(arm, commands[arm], extra, tmp / "out")
            out[arm].append(rec.add(workload=name, **sizes, **fields, run=i))
    digests = {r["digest"] for arm in arms if arm.kind.startswith("hspz") for r in out[arm]}
    if len(digests) > 1:
        raise SystemExit(f"{name}: hspZ arms disagree: {sorted(digests)}")
    return out


def warm_threaded(arms: list[Arm], commands: dict, extra: list[str], scratch: Path) -> None:
    """One untimed run of each CPU version at its most threads on this workload: the threaded
    seed-table build runs only on references of a million windows or more (`seed.PARALLEL_MIN`),
    which the warm-up workload is not, so numba would compile it in the first timed run (1.7 s
    of a 3.5 s `-t 16` run on the 30 x 6 pair, 2026-12-02)."""
    most: dict[Path | None, Arm] = {}
    for arm in arms:
        best = most.get(arm.alt)
        floor = max(1, (best.threads or 0) if best is not None else 0)
        if arm.kind == "hspz-cpu" and (arm.threads or 0) > floor:
            most[arm.alt] = arm
    for arm in most.values():
        cwd, env = hspz_place(arm)
        shutil.rmtree(scratch, ignore_errors=True)
        timed(hspz_cmd(arm, *commands[arm][1], scratch, extra), cwd, env)


def one_run(arm: Arm, command: tuple, extra: list[str], scratch: Path) -> dict:
    """One timed run of an arm: its record's fields.  hspZ writes into a fresh `scratch` folder
    each run (publishing over an earlier run's files costs more), removed after it."""
    what, args = command
    shutil.rmtree(scratch, ignore_errors=True)
    load, date = os.getloadavg(), now()
    if what == "lastz":
        wall, rss, text = timed(lastz_cmd(*args))
        got = {"hsps": lastz_hsps(text)}
    elif what == "pieces":
        wall, rss, text = lastz_parallel(*args)
        got = {"hsps": lastz_hsps(text)}
    else:
        cwd, env = hspz_place(arm)
        wall, rss, text = timed(hspz_cmd(arm, *args, scratch, extra), cwd, env)
        got = counts(text)
        shutil.rmtree(scratch, ignore_errors=True)
    stamp = arm.alt / "COMMIT" if arm.alt else None  # device_files.sh's "alt: COMMIT"
    return dict(
        arm=arm.label,
        kind=arm.kind,
        threads=arm.threads,
        gpus=arm.gpus,
        alt=str(arm.alt) if arm.alt else None,
        alt_commit=stamp.read_text().split()[-1] if stamp and stamp.exists() else None,
        hspz_args=extra if arm.kind.startswith("hspz") else None,
        date=date,
        loadavg=[round(x, 2) for x in load],
        wall_s=round(wall, 3),
        peak_rss_mib=round(rss / 1024, 1),
        **got,
    )


def print_table(name: str, runs: dict, repeat: int) -> None:
    """Medians per arm; the last column is each arm's speed against lastz (or the first arm)."""
    base = next((arm for arm in runs if arm.kind == "lastz"), next(iter(runs)))
    base_med = statistics.median(r["wall_s"] for r in runs[base])
    vs = "lastz" if base.kind == "lastz" else base.label
    print(f"workload {name}: median of {repeat} runs, {os.cpu_count()} cores")
    print(
        "| arm | wall s (median) | all runs | engine s | peak RSS MiB | estimate MiB | "
        f"peak/est | seeds | hits | HSPs | ns/hit | vs {vs} |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for arm, rs in runs.items():
        walls = [r["wall_s"] for r in rs]
        med = statistics.median(walls)
        last = rs[-1]
        hits = last.get("seed_hits")
        engine = statistics.median(r.get("engine_s", 0.0) for r in rs)
        nsph = f"{engine * 1e9 / hits:.2f}" if hits else "-"
        ratio = f"{base_med / med:.2f}x"
        peak = max(r["peak_rss_mib"] for r in rs)
        est = last.get("estimate_mib")
        vs_est = f"{peak / est:.2f}" if est else "-"
        print(
            f"| {arm.label} | {med:.2f} | {' '.join(f'{w:.2f}' for w in walls)} | "
            f"{engine:.2f} | {peak:.0f} | {est or '-'} | {vs_est} | {last.get('seeds', '-')} | "
            f"{hits or '-'} | {last.get('hsps', '-')} | {nsph} | {ratio} |"
        )
    loads = [r["loadavg"][0] for rs in runs.values() for r in rs]
    print(f"load average (1 min) before the runs: {min(loads):.2f} to {max(loads):.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workloads", nargs="+", metavar="WORKLOAD")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--arms", default=DEFAULT_ARMS)
    ap.add_argument("--no-gpu", action="store_true", help="leave the gpu arms out")
    ap.add_argument("--no-lastz", action="store_true", help="leave the lastz arms out")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument(
        "--sweep",
        help="thread counts of a CPU sweep, e.g. 1,2,4,8,16 (capped "
        "at the machine's cores); replaces the cpu arms",
    )
    ap.add_argument("--alt-sweep", help="the alt twin's thread counts in a sweep")
    ap.add_argument("--hspz-args", default="", help="more hspZ run flags, e.g. '-B 250M'")
    ap.add_argument("--alt", type=Path, help="a folder holding another hspz package")
    ap.add_argument("--warmup", default="tiny", help="workload of the untimed runs ('none')")
    ap.add_argument("--workdir", default=str(ROOT / "bench-data"))
    ap.add_argument("--files", type=Path, help="folder holding the real workloads' files")
    ap.add_argument("--machine", help="the machine's name in the records and the plot")
    ap.add_argument("--note", default="", help="free text kept in every record")
    ap.add_argument("--json", type=Path, help="append one JSON record a run to this file")
    ap.add_argument("--plot", type=Path, help="PNG of every record in --json (plot.py)")
    a = ap.parse_args()
    if a.plot and not a.json:
        ap.error("--plot draws the records of --json FILE: give both")
    alt = a.alt.resolve() if a.alt else None
    arms = parse_arms(a.arms, a.threads, alt)
    if a.sweep:
        arms = sweep_arms(a.sweep, a.alt_sweep, alt, os.cpu_count() or 1) + [
            arm for arm in arms if arm.kind != "hspz-cpu"
        ]
    arms = [
        arm
        for arm in arms
        if not (a.no_gpu and arm.kind == "hspz-gpu")
        and not ((a.no_lastz or not shutil.which("lastz")) and arm.kind.startswith("lastz"))
    ]
    a.files = a.files.resolve() if a.files else None
    work = Path(a.workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    facts = machine_facts()
    machine = a.machine or f"{facts['host']}, {facts['cores']} cores"
    rec = Recorder(
        a.json,
        dict(
            runner="benchmarks/run.py",
            session=now(),
            machine=machine,
            note=a.note,
            uptime=_version(["uptime"]),
            **facts,
        ),
    )
    tmp = Path(tempfile.mkdtemp(prefix="hspz-run-"))
    try:
        if a.warmup != "none":
            warm_up(arms, a.warmup, a, work, tmp)
        for name in a.workloads:
            print_table(name, run_workload(name, arms, a, work, tmp, rec), a.repeat)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"uptime at the end: {_version(['uptime'])}")
    if a.plot:
        from benchmarks.plot import load_records, plot

        plot(load_records([a.json]), a.plot)
        print(f"plot: {a.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
