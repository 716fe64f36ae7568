"""Where the CPU backend's 16 threads lose time (issue 24): the seed-table build step by step,
and the first pass batch by batch, in one process on the mammal-like 30 x 6 Mbp pair.

    export OUT=$PWD/out && mkdir -p $OUT && PYTHONPATH=$PWD python3 benchmarks/cpu_probe.py \
        [--pair mammal30x6] [--threads 1,2,4,8,16] [--pass-threads 16] [--repeat 3] \
        [--passes cold,warm,batches] [--workdir /tmp/bench] [--json $OUT/cpu_probe.json]
        [--hspz .device/alt]   # another version's hspz package (main's: its k-mer column build)
    # on the device, from the repository root (1 GPU machine, 16 cores), about 40 s:
    export OUT=$PWD/out && mkdir -p $OUT && bash benchmarks/cpu16_device.sh PROBE

1. The table (`hspz.stages.seed.build_seed_table`): first a cold build at the largest thread count
   (the first call of each compiled loop in the process, as in a run), then warm builds at each
   thread count (medians of --repeat), each step timed on its own, of the build the imported
   hspz has: main's (a k-mer column, each thread's k-mer share counted and placed over the
   whole column, a serial running sum, shift and occupancy pass) or cpu16's (range counts per
   window share, a scatter into the ranges, range sorts); for the pooled steps each task's
   start and end (their spread, the pool's dispatch lag); the seed codes; fresh against
   touched pages of the column's and the table's sizes written on T threads (first touch);
   and `build_seed_table` itself, whole.
2. The batches at --pass-threads, handed out as `run_unit` does (cpu16: `cpu.PieceQueue`'s
   seeds and pieces; main: whole batches, `cpu.run_seed_batch`, on a pool in plan order): each
   task's thread, start and end; per batch its seeds, hits, pieces, threads and span; per
   thread its busy time and when it ran dry.  Cold, then warm, then (`batches`) whole batches
   on a pool beside it.

Prints a compact table; writes everything as JSON (default $OUT/cpu_probe.json).  About 40 s on
16 cores (the pair is generated in --workdir on first use, a few seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ALT = next((sys.argv[i + 1] for i, a in enumerate(sys.argv[:-1]) if a == "--hspz"), None)
if ALT:  # another version's hspz package (its parent folder), e.g. .device/alt
    sys.path.insert(0, str(Path(ALT).resolve()))

from benchmarks.workloads import materialise  # noqa: E402
from hspz.core import jit  # noqa: E402
from hspz.core.options import Options  # noqa: E402
from hspz.engine import cpu  # noqa: E402
from hspz.engine.contract import Context, prepare_query, prepare_reference, unit_seed_batches  # noqa: E402
from hspz.io.packing import seed_codes  # noqa: E402
from hspz.io.readers import read_both  # noqa: E402
from hspz.stages import seed  # noqa: E402


@jit.njit
def _write_ones(out, i0, i1):
    for i in range(i0, i1):
        out[i] = 1


class Steps:
    """Wall seconds of named steps, and per pooled step each task's (start, end, thread)."""

    def __init__(self):
        self.wall: dict[str, float] = {}
        self.tasks: dict[str, list] = {}

    def run(self, name: str, fn):
        t0 = time.perf_counter()
        got = fn()
        self.wall[name] = self.wall.get(name, 0.0) + time.perf_counter() - t0
        return got

    def pooled(self, name: str, pool, fn, n: int):
        t0 = time.perf_counter()
        spans = []

        def task(i):
            a = time.perf_counter()
            fn(i)
            spans.append((a - t0, time.perf_counter() - t0, threading.get_ident()))

        list(pool.map(task, range(n)))
        self.wall[name] = time.perf_counter() - t0
        self.tasks[name] = spans


def touch_costs(windows: int, n_kmers: int, threads: int, pool) -> dict[str, float]:
    """Seconds to write fresh arrays of the k-mer column's, the table's and the positions' sizes
    on `threads` threads (page faults and zeroing), and to write them again (touched)."""
    out = {}
    for name, n in (("column", windows), ("table", n_kmers)):
        a = np.empty(n, np.uint32)
        cuts = [i * n // threads for i in range(threads + 1)]
        for when in ("fresh", "touched"):
            t0 = time.perf_counter()
            if threads == 1:
                _write_ones(a, 0, n)
            else:
                list(
                    pool.map(lambda i, a=a, c=cuts: _write_ones(a, c[i], c[i + 1]), range(threads))
                )
            out[f"{name} {when}"] = time.perf_counter() - t0
        del a
    t0 = time.perf_counter()
    z = np.zeros(n_kmers, np.uint32)
    z[::1024] = 1  # calloc's zero pages faulted in: one write a 4 KiB page
    out["np.zeros table + fault"] = time.perf_counter() - t0
    del z
    return out


def table_steps(codes, block_len: int, shape, step: int, threads: int) -> dict:
    """`build_seed_table`'s steps on `threads` threads, each timed (the same loops, the same
    bytes: checked against the whole build by the caller)."""
    st = Steps()
    offset = (shape.size + 1) % step
    first = step - offset
    count = max(0, (block_len + offset - shape.size) // step)
    end = min(first + count * step, len(codes) - shape.size + 1)
    care = np.asarray(shape.care, dtype=np.int64)
    windows = max(0, -(-(end - first) // step))
    n_kmers = shape.n_kmers
    t0 = time.perf_counter()
    pool = ThreadPoolExecutor(threads)
    list(pool.map(lambda i: None, range(threads * 4)))
    st.wall["pool start"] = time.perf_counter() - t0
    _write_ones(np.empty(1, np.uint32), 0, 1)  # loaded, not timed
    touch = touch_costs(windows, n_kmers, threads, pool)
    if threads == 1:
        table = st.run("alloc table (zeros)", lambda: np.zeros(n_kmers, np.uint32))
        st.run(
            "histogram",
            lambda: seed._table_histogram(codes, care, shape.size, first, end, step, table),
        )
        st.run("running sum", lambda: seed._running_sum(table))
        pos = st.run("alloc pos (empty)", lambda: np.empty(int(table[-1]), np.uint32))
        st.run(
            "fill", lambda: seed._table_fill(codes, care, shape.size, first, end, step, table, pos)
        )
        n = len(pos)
    elif hasattr(seed, "_kmer_column"):  # the build of main before cpu16: a k-mer column
        kmer = st.run("alloc column (empty)", lambda: np.empty(windows, np.uint32))
        cuts = [i * windows // threads for i in range(threads + 1)]
        bounds = [k * n_kmers // threads for k in range(threads + 1)]
        st.pooled(
            "kmer column",
            pool,
            lambda i: seed._kmer_column(
                codes, care, shape.size, first, end, step, cuts[i], cuts[i + 1], kmer
            ),
            threads,
        )
        buf = st.run(
            "alloc table (zeros)", lambda: np.zeros(n_kmers + seed.SPARE * threads, np.uint32)
        )
        st.pooled(
            "histogram",
            pool,
            lambda k: seed._range_histogram(
                kmer, bounds[k], bounds[k + 1], buf, n_kmers + seed.SPARE * k
            ),
            threads,
        )
        table = buf[:n_kmers]
        st.run("running sum", lambda: seed._running_sum(table))
        n = int(table[-1])
        pos_buf = st.run("alloc pos (empty)", lambda: np.empty(n + seed.SPARE * threads, np.uint32))
        st.pooled(
            "fill",
            pool,
            lambda k: seed._range_fill(
                kmer,
                first,
                step,
                bounds[k],
                bounds[k + 1],
                buf,
                n_kmers + seed.SPARE * k,
                pos_buf,
                n + seed.SPARE * k,
            ),
            threads,
        )
        pos = pos_buf[:n]
    else:  # cpu16's: per-share range counts, scatter, per-range counting sort
        return ranged_steps(st, pool, codes, care, shape, first, end, step, windows, threads, touch)

    def shift():
        table[:-1] = table[1:]
        table[-1] = n

    st.run("shift", shift)
    bits = st.run("alloc bits", lambda: np.zeros((n_kmers + 63) // 64, np.uint64))
    st.run("occupancy", lambda: seed._occupancy(table, bits))
    pool.shutdown()
    return {
        "threads": threads,
        "windows": windows,
        "positions": n,
        "wall": st.wall,
        "tasks": st.tasks,
        "touch": touch,
        "table": table,
        "pos": pos,
        "bits": bits,
    }


def ranged_steps(st, pool, codes, care, shape, first, end, step, windows, threads, touch):
    """`seed._parallel_table`'s steps, each timed."""
    n_kmers, wbits = shape.n_kmers, 2 * shape.weight
    bits = max(0, min(wbits - 6, (threads * seed.RANGES_PER_THREAD - 1).bit_length()))
    shift, ranges = wbits - bits, 1 << bits
    cuts = [first + (i * windows // threads) * step for i in range(threads + 1)]
    cuts[-1] = end
    hist = np.zeros((threads, ranges), np.int64)
    st.pooled(
        "range counts",
        pool,
        lambda i: seed._share_counts(
            codes, care, shape.size, cuts[i], cuts[i + 1], step, shift, hist[i]
        ),
        threads,
    )

    def places():
        sizes = hist.sum(axis=0)
        starts = np.zeros(ranges + 1, np.int64)
        np.cumsum(sizes, out=starts[1:])
        at = starts[:-1][None, :] + np.cumsum(hist, axis=0) - hist
        n = int(starts[-1])
        return sizes, starts, at, n, np.empty(n, np.uint32), np.empty(n, np.uint32)

    sizes, starts, at, n, kmers, pos = st.run("places + alloc", places)
    st.pooled(
        "scatter",
        pool,
        lambda i: seed._share_scatter(
            codes, care, shape.size, cuts[i], cuts[i + 1], step, shift, at[i], kmers, pos
        ),
        threads,
    )

    def groups():
        work = np.cumsum(sizes + (n_kmers >> bits) // 4)
        g = np.unique(
            np.searchsorted(
                work, work[-1] * np.arange(1, 4 * threads) // (4 * threads), side="right"
            )
        )
        return [0, *[int(x) for x in g if 0 < x < ranges], ranges]

    edges = st.run("groups", groups)
    table = st.run("alloc table (empty)", lambda: np.empty(n_kmers, np.uint32))
    bits_ = np.empty((n_kmers + 63) // 64, np.uint64)
    st.pooled(
        "range sort",
        pool,
        lambda g: seed._range_sort(
            kmers, pos, starts, edges[g], edges[g + 1], shift, n_kmers, table, bits_
        ),
        len(edges) - 1,
    )
    pool.shutdown()
    return {
        "threads": threads,
        "windows": windows,
        "positions": n,
        "wall": st.wall,
        "tasks": st.tasks,
        "touch": touch,
        "table": table,
        "pos": pos,
        "bits": bits_,
        "largest range": int(sizes.max()),
        "ranges": ranges,
    }


def whole_build(codes, block_len, shape, step, threads) -> float:
    t0 = time.perf_counter()
    t = seed.build_seed_table(codes, block_len, shape, step, threads)
    _ = t.occupied
    return time.perf_counter() - t0


def summary_of(run: dict) -> dict:
    """A step run without its arrays; per pooled step the tasks' spread."""
    out = {k: v for k, v in run.items() if k not in ("table", "pos", "bits", "tasks")}
    out["task_spread"] = {
        name: {
            "first start": min(s[0] for s in spans),
            "last start": max(s[0] for s in spans),
            "first end": min(s[1] for s in spans),
            "last end": max(s[1] for s in spans),
            "task s max": max(s[1] - s[0] for s in spans),
            "task s mean": statistics.fmean(s[1] - s[0] for s in spans),
        }
        for name, spans in run["tasks"].items()
    }
    out["tasks"] = {
        name: [[round(a, 5), round(b, 5)] for a, b, _ in spans]
        for name, spans in run["tasks"].items()
    }
    return out


def probe_table(ref, ctx, threads_list: list[int], repeat: int) -> dict:
    shape, step = ctx.shape, ctx.options.step
    t0 = time.perf_counter()
    codes = seed_codes(ref.packed.buf)
    codes_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    codes = seed_codes(ref.packed.buf)
    codes_warm = time.perf_counter() - t0
    block_len = ref.packed.block_len
    cold = table_steps(codes, block_len, shape, step, max(threads_list))
    want = seed.build_seed_table(codes, block_len, shape, step, 1)
    same = (
        np.array_equal(cold["table"], want.index_table)
        and np.array_equal(cold["pos"], want.pos_table)
        and np.array_equal(cold["bits"], want.occupied)
    )
    if not same:
        raise SystemExit("cpu_probe: the timed steps built another table than build_seed_table")
    warm = {}
    for t in threads_list:
        runs = [summary_of(table_steps(codes, block_len, shape, step, t)) for _ in range(repeat)]
        whole = [whole_build(codes, block_len, shape, step, t) for _ in range(repeat)]
        best = min(runs, key=lambda r: sum(r["wall"].values()))
        best["median wall"] = {
            k: statistics.median(r["wall"][k] for r in runs) for k in runs[0]["wall"]
        }
        best["median touch"] = {
            k: statistics.median(r["touch"][k] for r in runs) for k in runs[0]["touch"]
        }
        best["whole build s"] = whole
        warm[t] = best
    return {
        "seed codes s": codes_s,
        "seed codes warm s": codes_warm,
        "cold": summary_of(cold),
        "warm": warm,
    }


def probe_batches(ctx, ref, qry, threads: int, whole_batches: bool) -> dict:
    """`run_unit`'s batches on `threads` threads, each task timed: whole batches handed to a
    pool in plan order (main's `run_unit`, or `whole_batches`), else `cpu.PieceQueue`'s seeds
    and pieces (cpu16's)."""
    jobs = unit_seed_batches(ctx, qry)
    tasks: list[dict] = []
    totals = [None] * len(jobs)
    t0 = time.perf_counter()

    def span(kind, index, a, phases=None, **more):
        tasks.append(
            {
                "kind": kind,
                "batch": index,
                "thread": threading.get_ident(),
                "start": round(a - t0, 5),
                "end": round(time.perf_counter() - t0, 5),
                "phases": phases or {},
                **more,
            }
        )

    def one(i):
        _, strand, chunk = jobs[i]
        clock = cpu.PhaseClock()
        a = time.perf_counter()
        out = cpu.run_seed_batch(ctx, ref, qry, strand, chunk, clock)
        totals[i] = (out.seeds, out.hits)
        span("batch", i, a, {p: round(v[0][0], 5) for p, v in clock.table().items() if v})

    if whole_batches or not hasattr(cpu, "PieceQueue"):
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(one, range(len(jobs))))
        mode = "whole batches"
    else:

        class Timed(cpu.PieceQueue):
            def seed(self, index, mine):
                a = time.perf_counter()
                super().seed(index, mine)
                span("seed", index, a)

            def piece(self, index, seed_batch, c, k, bounds):
                a = time.perf_counter()
                super().piece(index, seed_batch, c, k, bounds)
                totals[index] = (seed_batch.out.seeds, seed_batch.out.hits)
                span("piece", index, a, chunk=c, piece=k)

        from hspz.engine.contract import SeedBatchTally

        Timed(ctx, ref, qry, jobs, cpu.PhaseClock(), SeedBatchTally(len(jobs), None)).run(threads)
        mode = "piece queue"
    makespan = time.perf_counter() - t0
    idents = sorted(
        {t["thread"] for t in tasks},
        key=lambda x: min(t["start"] for t in tasks if t["thread"] == x),
    )
    for t in tasks:
        t["thread"] = idents.index(t["thread"])
    per_thread = []
    for k in range(len(idents)):
        mine = [t for t in tasks if t["thread"] == k]
        per_thread.append(
            {
                "thread": k,
                "tasks": len(mine),
                "busy": round(sum(t["end"] - t["start"] for t in mine), 4),
                "dry at": round(max(t["end"] for t in mine), 4),
            }
        )
    batches = []
    for i in range(len(jobs)):
        mine = [t for t in tasks if t["batch"] == i]
        batches.append(
            {
                "batch": i,
                "seeds": totals[i][0] if totals[i] else 0,
                "hits": totals[i][1] if totals[i] else 0,
                "pieces": sum(t["kind"] == "piece" for t in mine),
                "threads": len({t["thread"] for t in mine}),
                "start": min(t["start"] for t in mine),
                "end": max(t["end"] for t in mine),
                "busy": round(sum(t["end"] - t["start"] for t in mine), 4),
                "phases": next((t["phases"] for t in mine if t["phases"]), {}),
            }
        )
    return {
        "threads": threads,
        "mode": mode,
        "batches": len(jobs),
        "makespan": makespan,
        "rows": batches,
        "tasks": tasks,
        "per_thread": per_thread,
    }


def print_table(res: dict) -> None:
    tb = res["table"]
    print(
        f"seed codes {tb['seed codes s']:.3f} s cold, {tb['seed codes warm s']:.3f} warm; "
        "table steps, wall s (cold at "
        f"{tb['cold']['threads']} threads, then warm medians):"
    )
    cols = list(tb["warm"].keys())
    names = list(
        dict.fromkeys(
            list(tb["cold"]["wall"]) + [k for t in cols for k in tb["warm"][t]["median wall"]]
        )
    )
    print(f"{'step':24s} {'cold':>7s} " + " ".join(f"{'t' + str(t):>7s}" for t in cols))
    for name in names:
        cells = [tb["cold"]["wall"].get(name)] + [
            tb["warm"][t]["median wall"].get(name) for t in cols
        ]
        print(
            f"{name:24s} " + " ".join(f"{c:7.3f}" if c is not None else f"{'-':>7s}" for c in cells)
        )
    print(
        f"{'sum of steps':24s} {sum(tb['cold']['wall'].values()):7.3f} "
        + " ".join(
            f"{sum(tb['warm'][t]['median wall'].values()) - tb['warm'][t]['median wall']['pool start']:7.3f}"  # noqa: E501
            for t in cols
        )
        + "  (warm: without pool start)"
    )
    print(
        f"{'build_seed_table whole':24s} {'':7s} "
        + " ".join(f"{statistics.median(tb['warm'][t]['whole build s']):7.3f}" for t in cols)
    )
    for t in cols:
        sp = tb["warm"][t]["task_spread"]
        for name, s in sp.items():
            print(
                f"  t{t} {name}: tasks {s['task s mean']:.3f} mean / {s['task s max']:.3f} "
                f"max s, starts {s['first start']:.4f}-{s['last start']:.4f}, ends "
                f"{s['first end']:.4f}-{s['last end']:.4f}"
            )
    print("touch (fresh vs touched pages), s:")
    for t in cols:
        print(
            f"  t{t}: "
            + ", ".join(f"{k} {v:.3f}" for k, v in tb["warm"][t]["median touch"].items())
        )
    for label, bp in res["batches"].items():
        rows = bp["rows"]
        print(
            f"batches {label} ({bp['mode']}), {bp['threads']} threads: makespan "
            f"{bp['makespan']:.3f} s, {bp['batches']} batches, {len(bp['tasks'])} tasks"
        )
        busy = [p["busy"] for p in bp["per_thread"]]
        print(
            f"  busy per thread {min(busy):.3f}-{max(busy):.3f} s (mean "
            f"{statistics.fmean(busy):.3f}); dry at "
            + " ".join(f"{p['dry at']:.2f}" for p in bp["per_thread"])
        )
        top = sorted(rows, key=lambda r: -r["busy"])[:6]
        print(
            "  busiest batches (batch hits pieces threads busy s start-end): "
            + "; ".join(
                f"{r['batch']} {r['hits']:.3g} {r['pieces']} {r['threads']} {r['busy']:.3f} "
                f"{r['start']:.2f}-{r['end']:.2f}"
                for r in top
            )
        )
        late = sorted(rows, key=lambda r: -r["start"])[:4]
        print(
            "  last started: "
            + "; ".join(f"{r['batch']} at {r['start']:.3f} to {r['end']:.3f}" for r in late)
        )


def load_pair(name: str, workdir: Path):
    files = materialise(name, workdir)
    t0 = time.perf_counter()
    ref_records, qry_records = read_both(str(files["reference"]), str(files["query"]))
    ctx = Context.from_options(Options())
    ref = prepare_reference(ctx, 0, ref_records)
    qry = prepare_query(ctx, 0, qry_records)
    return ctx, ref, qry, time.perf_counter() - t0


def fill_cache(ctx, ref, qry) -> None:
    """Every compiled loop the probe calls, once (numba compiles into its disk cache what it
    lacks): run in a child first, so that the probe's cold figures are a run's, which finds
    the cache filled (run.py's warm-up run fills it before its timed runs)."""
    codes = seed_codes(ref.packed.buf)
    for t in (1, 2):
        _ = seed.build_seed_table(
            codes, ref.packed.block_len, ctx.shape, ctx.options.step, t
        ).occupied
    with ThreadPoolExecutor(2) as pool:
        touch_costs(1 << 16, 1 << 16, 2, pool)
    ref._table = seed.build_seed_table(codes, ref.packed.block_len, ctx.shape, ctx.options.step, 1)
    _, strand, chunk = unit_seed_batches(ctx, qry)[0]
    cpu.run_seed_batch(ctx, ref, qry, strand, chunk)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hspz", help="import hspz from this folder (another version's package)")
    p.add_argument(
        "--fill-cache",
        action="store_true",
        help="only call every compiled loop once (what the probe runs in a child)",
    )
    p.add_argument("--pair", default="mammal30x6")
    p.add_argument("--threads", default="1,2,4,8,16")
    p.add_argument("--pass-threads", type=int, default=16)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument(
        "--passes",
        default="cold,warm,batches",
        help="passes over the batches to time: cold, warm (this tree's scheduling), "
        "batches (whole batches on a pool, as main)",
    )
    p.add_argument("--workdir", type=Path, default=Path(os.environ.get("W", "/tmp/bench")))
    p.add_argument("--json", type=Path, default=Path(os.environ.get("OUT", ".")) / "cpu_probe.json")
    a = p.parse_args(argv)
    t_all = time.perf_counter()
    if a.fill_cache:
        fill_cache(*load_pair(a.pair, a.workdir)[:3])
        return 0
    materialise(a.pair, a.workdir)
    subprocess.run(
        [
            sys.executable,
            __file__,
            "--fill-cache",
            "--pair",
            a.pair,
            "--workdir",
            str(a.workdir),
            *(["--hspz", a.hspz] if a.hspz else []),
        ],
        check=True,
    )
    fill_s = time.perf_counter() - t_all
    ctx, ref, qry, read_s = load_pair(a.pair, a.workdir)
    threads_list = [int(t) for t in a.threads.split(",")]
    t0 = time.perf_counter()
    jit.load()
    res = {
        "pair": a.pair,
        "hspz": str(Path(seed.__file__).parent),
        "cores": os.cpu_count(),
        "read s": read_s,
        "numba load s": time.perf_counter() - t0,
        "generate + fill cache s": fill_s,
        "load": os.getloadavg()[0],
    }
    res["table"] = probe_table(ref, ctx, threads_list, a.repeat)
    ref._table = seed.build_seed_table(
        seed_codes(ref.packed.buf),
        ref.packed.block_len,
        ctx.shape,
        ctx.options.step,
        a.pass_threads,
    )
    _ = ref._table.occupied
    res["batches"] = {
        label: probe_batches(ctx, ref, qry, a.pass_threads, label == "batches")
        for label in a.passes.split(",")
        if label
    }
    res["probe s"] = time.perf_counter() - t_all
    print(f"hspz from {res['hspz']}")
    print(
        f"{a.pair}: generate + fill cache {fill_s:.1f} s, read {read_s:.2f} s, numba load "
        f"{res['numba load s']:.2f} s, {os.cpu_count()} cores, load {res['load']:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after"
    )
    print_table(res)
    print(f"probe {res['probe s']:.1f} s; JSON {a.json}")
    a.json.write_text(json.dumps(res, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
