"""The reference index and batch mode on one machine (a device benchmark):

    python benchmarks/index_batch.py --work /tmp/ib --out $OUT [--ref-mbp 1000] [--queries 20]
        [--steps gen,index,loads,single,batch] [--runs 5]

gen     a simulated reference (--ref-mbp, --chromosomes records) and --queries queries of
        --query-mbp each (`simulate.write_queries_2bit`), kept in --work between calls; the
        reference also as FASTA.gz (gzip -6, in members compressed in parallel), the form
        genomes are distributed in (hg38.fa.gz)
index   `hspZ index` of the reference (on the GPU when one is visible): wall time, size on disk
loads   every bin loaded from the index, warm page cache and cold (the files' pages dropped with
        posix_fadvise first), to the host and to the device
single  separate runs of query 1: without the index (the reference as 2bit, and as FASTA.gz),
        with it, and with it plus --reference (the background verification); --runs of each,
        interleaved
batch   all queries: `run --query-list` without and with the index, and separate runs of each
        query without the index

Every hspZ call is a child process timed by its wall clock, its peak RSS read from wait4, and its
`--time` ledger (GPU time per unit, when the first unit started); outputs are checked equal
across arms by their digests.  One JSON record per call goes to OUT/index_batch.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def hspz(args: list[str], log: Path) -> dict:
    """One hspZ call: wall seconds, peak RSS (MiB), exit status, digests, ledger totals."""
    from benchmarks.run import PEAK_RSS  # the peak of a fresh image, not of this big parent

    rss = log.with_suffix(".rss")
    t = time.perf_counter()
    with open(log, "w") as err:
        proc = subprocess.run(
            [sys.executable, "-S", "-c", PEAK_RSS, str(rss), sys.executable, "-m", "hspz", *args],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    wall = time.perf_counter() - t
    out, peak_kib = proc.stdout, int(rss.read_text() or 0)
    text = log.read_text()
    ledger = [line.split("\t") for line in text.splitlines() if line.startswith("unit ledger:\t")]
    head = ledger[0][1:] if ledger else []
    rows = [dict(zip(head, r[1:], strict=True)) for r in ledger[1:]]
    gpu_ms = sum(float(r["gpu_ms"]) for r in rows)
    return dict(
        args=args,
        wall_s=round(wall, 3),
        peak_rss_mib=round(peak_kib / 1024, 1),
        status=proc.returncode,
        digests=re.findall(r"^digest: (.*)$", out, re.M),
        gpu_s=round(gpu_ms / 1e3, 3),
        hits=sum(int(r["hits"]) for r in rows),
        first_unit_s=round(min((float(r["host_start_ms"]) for r in rows), default=0.0) / 1e3, 3),
        units=len(rows),
        log=str(log),
    )


def record(out: Path, step: str, arm: str, result: dict) -> dict:
    result = dict(step=step, arm=arm, **result)
    with open(out / "index_batch.jsonl", "a") as fh:
        fh.write(json.dumps(result) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("args", "log")}), flush=True)
    if result.get("status", 0) != 0:
        print(Path(result["log"]).read_text()[-3000:], file=sys.stderr)
        raise SystemExit(f"{step}/{arm} failed")
    return result


def gen(a, work: Path, out: Path) -> None:
    from benchmarks.simulate import PairSpec, write_queries_2bit

    ref = work / "ref.2bit"
    if ref.exists() and all((work / f"q{k}.2bit").exists() for k in range(1, a.queries + 1)):
        return
    spec = PairSpec(
        ref_mbp=a.ref_mbp, query_mbp=a.query_mbp, chromosomes=a.chromosomes, divergence=0.4, seed=7
    )
    t = time.perf_counter()
    write_queries_2bit(spec, ref, {work / f"q{k}.2bit": 100 + k for k in range(1, a.queries + 1)})
    (work / "list.txt").write_text("".join(f"q{k}.2bit\n" for k in range(1, a.queries + 1)))
    record(
        out,
        "gen",
        "simulate",
        dict(wall_s=round(time.perf_counter() - t, 1), ref_bytes=ref.stat().st_size),
    )


def gen_fasta_gz(work: Path, out: Path) -> Path:
    """ref.fa.gz beside ref.2bit: one gzip member per 64 MiB of FASTA, compressed at level 6 on
    every core (a multi-member file is one gzip stream to every reader)."""
    import gzip
    from concurrent.futures import ProcessPoolExecutor

    from hspz.io.fasta import write_fasta
    from hspz.io.readers import read_records

    dest = work / "ref.fa.gz"
    if dest.exists():
        return dest
    t = time.perf_counter()
    plain = work / "ref.fa"
    write_fasta(plain, read_records(work / "ref.2bit"))
    data = plain.read_bytes()
    step = 64 << 20
    with ProcessPoolExecutor(os.cpu_count()) as pool:
        members = list(
            pool.map(gzip.compress, (data[i : i + step] for i in range(0, len(data), step)))
        )
    plain.unlink()
    tmp = dest.with_suffix(".tmp")
    with open(tmp, "wb") as fh:
        for m in members:
            fh.write(m)
    tmp.rename(dest)
    record(
        out,
        "gen",
        "fasta.gz",
        dict(wall_s=round(time.perf_counter() - t, 1), ref_bytes=dest.stat().st_size),
    )
    return dest


def index(a, work: Path, out: Path) -> None:
    ix = work / "ix"
    shutil.rmtree(ix, ignore_errors=True)
    r = hspz(
        ["index", "-r", str(work / "ref.2bit"), "--index", str(ix), "--time"], work / "index.log"
    )
    size = sum(p.stat().st_size for p in ix.rglob("*") if p.is_file())
    r["size_gib"] = round(size / 2**30, 3)
    record(out, "index", "build", r)


def loads(a, work: Path, out: Path) -> None:
    from hspz.formats import index as ixm

    idx = ixm.open_index(work / "ix")
    gpu = None
    try:
        from hspz.core.options import Options
        from hspz.engine import gpu  # noqa: F811
        from hspz.engine.contract import Context  # noqa: F811

        ctx = Context.from_options(Options())
    except Exception:  # no device here: host loads only
        gpu = None
    for b in range(len(idx.bins)):
        size = sum(
            e.length * ixm.ARRAYS[n].itemsize
            for (bb, n), e in idx.manifest.arrays.items()
            if bb == b
        )
        for cache in ("warm", "cold", "warm"):
            if cache == "cold":
                for name in ixm.ARRAYS:
                    fd = os.open(idx.array_path(b, name), os.O_RDONLY)
                    os.fsync(fd)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    os.close(fd)
            t = time.perf_counter()
            if gpu is not None:
                ref = gpu.load_reference(ctx, idx, b)
                del ref
                target = "device"
            else:
                idx.load_host(b)
                target = "host"
            s = time.perf_counter() - t
            record(
                out,
                "loads",
                f"bin{b:03d}-{cache}-{target}",
                dict(
                    seconds=round(s, 3),
                    gib=round(size / 2**30, 3),
                    gib_per_s=round(size / 2**30 / s, 2),
                ),
            )


def single(a, work: Path, out: Path) -> None:
    q = str(work / "q1.2bit")
    ref, ix = str(work / "ref.2bit"), str(work / "ix")
    gz = str(gen_fasta_gz(work, out))
    arms = {
        "no-index": ["-r", ref],
        "no-index-fa.gz": ["-r", gz],
        "index": ["--index", ix],
        "index+reference": ["--index", ix, "-r", ref],
    }
    results: dict[str, list[dict]] = {k: [] for k in arms}
    for i in range(a.runs):
        for arm, flags in arms.items():
            o = work / f"single-{arm}"
            shutil.rmtree(o, ignore_errors=True)
            r = hspz(
                ["run", *flags, "-q", q, "-o", str(o), "--time"], work / f"single-{arm}-{i}.log"
            )
            results[arm].append(record(out, "single", arm, r))
    summarise(out, "single", results)


def batch(a, work: Path, out: Path) -> None:
    ref, ix, lst = str(work / "ref.2bit"), str(work / "ix"), str(work / "list.txt")
    results: dict[str, list[dict]] = {"batch": [], "batch+index": [], "separate": []}
    for i in range(a.batch_runs):
        for arm, flags in (("batch", ["-r", ref]), ("batch+index", ["--index", ix])):
            o = work / f"batch-{arm}"
            shutil.rmtree(o, ignore_errors=True)
            r = hspz(
                ["run", *flags, "--query-list", lst, "-o", str(o), "--time"],
                work / f"{arm}-{i}.log",
            )
            results[arm].append(record(out, "batch", arm, r))
    total = dict(wall_s=0.0, gpu_s=0.0, peak_rss_mib=0.0, digests=[], status=0, hits=0)
    for k in range(1, a.queries + 1):
        o = work / f"sep-{k}"
        shutil.rmtree(o, ignore_errors=True)
        r = record(
            out,
            "batch",
            f"separate-q{k}",
            hspz(
                ["run", "-r", ref, "-q", str(work / f"q{k}.2bit"), "-o", str(o), "--time"],
                work / f"sep-{k}.log",
            ),
        )
        total["wall_s"] += r["wall_s"]
        total["gpu_s"] += r["gpu_s"]
        total["hits"] += r["hits"]
        total["peak_rss_mib"] = max(total["peak_rss_mib"], r["peak_rss_mib"])
        total["digests"] += [f"{k:06d} {d}" for d in r["digests"]]
    results["separate"].append(record(out, "batch", "separate-total", total))
    summarise(out, "batch", results)


def summarise(out: Path, step: str, results: dict[str, list[dict]]) -> None:
    digests = {arm: rs[0]["digests"] for arm, rs in results.items() if rs}
    same = len({json.dumps(sorted(d)) for d in digests.values()}) == 1
    lines = [f"{step}: digests equal across arms: {same}"]
    for arm, rs in results.items():
        walls = [r["wall_s"] for r in rs]
        lines.append(
            f"{step}: {arm:<18} wall median {statistics.median(walls):.2f} s "
            f"(all {' '.join(f'{w:.2f}' for w in walls)}), gpu "
            f"{statistics.median([r['gpu_s'] for r in rs]):.2f} s, first unit "
            f"{statistics.median([r.get('first_unit_s', 0) for r in rs]):.2f} s, "
            f"peak RSS {max(r['peak_rss_mib'] for r in rs):.0f} MiB"
        )
    with open(out / "summary.txt", "a") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


STEPS = {"gen": gen, "index": index, "loads": loads, "single": single, "batch": batch}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--ref-mbp", type=float, default=1000)
    p.add_argument("--chromosomes", type=int, default=25)
    p.add_argument("--query-mbp", type=float, default=5)
    p.add_argument("--queries", type=int, default=20)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--batch-runs", type=int, default=2)
    p.add_argument("--steps", default="gen,index,loads,single,batch")
    a = p.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    a.out.mkdir(parents=True, exist_ok=True)
    for step in a.steps.split(","):
        t = time.perf_counter()
        STEPS[step](a, a.work, a.out)
        print(f"step {step}: {time.perf_counter() - t:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
