"""The CPU memory estimate against the measured peak RSS: one markdown row per workload, thread
count and worker count, from the two lines `hspZ run --time` prints (`time: peak RSS ...` and
`time: memory estimate ...`; main process, and the largest worker process when there are
several).  The tables in BENCHMARKS.md ("Memory: peak RSS against the preflight's estimate",
before and after the estimate counted the records'
seedable bases, `hspz.planning.seedable`; 2026-12-01) come from this script:

    python benchmarks/memory_model.py --workdir /tmp/memory [--threads 1 2] [--gpus 1 2]
        [--workloads demo multibin hpylori sim sim8M saureus mammal6x1 mammal30x6 ...]

Workloads: the demo pair, the tests' multibin pair (its FLAGS), H. pylori (workloads.toml,
Debian's ragout-examples) and a simulated 24 x 4 Mbp pair (2bit, divergence 0.4) at the default
layout (one reference bin) and at -B 8M (four) by default; any other name of
benchmarks/workloads.toml at its default layout (the mammal-like pairs of issue 24, S. aureus).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.simulate import PairSpec, write_pair_2bit  # noqa: E402
from benchmarks.workloads import materialise  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SIM = PairSpec(ref_mbp=24, query_mbp=4, seed=1, divergence=0.4)


DEFAULT = ("demo", "multibin", "hpylori", "sim", "sim8M")


def workloads(workdir: Path, names=DEFAULT) -> list[tuple[str, Path, Path, list[str]]]:
    out = []
    for name in names:
        if name == "demo":
            out.append(("demo", ROOT / "demo/reference.fa.gz", ROOT / "demo/query.2bit", []))
        elif name == "multibin":
            sys.path.insert(0, str(ROOT / "tests"))
            from multibin import FLAGS, write_pair

            out.append(("multibin", *write_pair(workdir), list(FLAGS)))
        elif name in ("sim", "sim8M"):
            ref, qry = workdir / "sim_ref.2bit", workdir / "sim_qry.2bit"
            if not (ref.exists() and qry.exists()):
                write_pair_2bit(SIM, ref, qry)
            out.append(
                ("sim 24 x 4 Mbp", ref, qry, [])
                if name == "sim"
                else ("sim 24 x 4 Mbp, -B 8M", ref, qry, ["-B", "8000000"])
            )
        else:
            files = materialise(name, workdir)
            out.append(
                ({"hpylori": "H. pylori"}.get(name, name), files["reference"], files["query"], [])
            )
    return out


def measure(
    ref: Path, qry: Path, flags: list[str], threads: int, gpus: int, out: Path
) -> tuple[int, list[float], list[float]]:
    """(workers, peak RSS [main, largest], estimate [main, largest]) in MiB."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HSPZ_")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hspz",
            "run",
            "-r",
            str(ref),
            "-q",
            str(qry),
            *flags,
            "--backend",
            "cpu",
            "-t",
            str(threads),
            "--gpus",
            str(gpus),
            "--time",
            "-o",
            str(out),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    err = done.stderr
    workers = int(re.search(r"^schedule: policy=\S+ W=(\d+)", err, re.M).group(1))
    peak = re.search(r"^time: peak RSS ([\d.]+) MiB \(main\), ([\d.]+) MiB", err, re.M)
    est = re.search(r"^time: memory estimate ([\d.]+) MiB \(main\), ([\d.]+) MiB", err, re.M)
    return workers, [float(x) for x in peak.groups()], [float(x) for x in est.groups()]


def rows(workdir: Path, threads: list[int], gpus: list[int], names=DEFAULT) -> list[str]:
    out = []
    for name, ref, qry, flags in workloads(workdir, names):
        for g in gpus:
            for t in threads:
                w, peak, est = measure(ref, qry, flags, t, g, workdir / "out")
                which = [("main", 0)] if w == 1 else [("main", 0), ("worker", 1)]
                for label, i in which:
                    out.append(
                        f"| {name} | {t} | {g} | {w} ({label}) | {est[i]:.0f} | "
                        f"{peak[i]:.0f} | {peak[i] / est[i]:.2f} |"
                    )
                    print(out[-1], flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--gpus", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--workloads", nargs="+", default=list(DEFAULT))
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    print(
        "| workload | -t | --gpus | workers (process) | estimate MiB | peak RSS MiB | "
        "peak / estimate |\n|---|---|---|---|---|---|---|"
    )
    rows(args.workdir, args.threads, args.gpus, args.workloads)


if __name__ == "__main__":
    main()
