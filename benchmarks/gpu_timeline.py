"""Where the GPU waits during a unit (issue 27): one `hspZ run` traced with CUPTI through
torch's profiler (Kineto records every kernel and copy of the process, CuPy's included), then
the device's timeline read back: busy time, idle gaps, and what each gap sits between.

    python3 benchmarks/gpu_timeline.py REF QUERY [--hspz-args "-B 250M"] [--top 30]
        [--trace trace.json]

A first, untimed run compiles the kernels and loads the bins' code; the second is traced.
The unit ledger's GPU time (`gpu_ms`) spans the unit's first launch to its last group's end:
the kernels' own time is what Nsight Compute sums (`kprof`), the rest is here as gaps.  Runs
only where torch and CuPy share one CUDA install (the H200 machine's image).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import shlex
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def run_once(ref: str, qry: str, out: Path, extra: list[str]) -> str:
    from hspz.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stderr(buf), contextlib.redirect_stdout(buf):
        code = main(["run", "-r", ref, "-q", qry, "-o", str(out), "--time", *extra])
    if code:
        raise SystemExit(f"gpu_timeline: hspZ run failed ({code}):\n{buf.getvalue()[-2000:]}")
    return buf.getvalue()


def family(name: str) -> str:
    name = re.split(r"[(<]", name, maxsplit=1)[0].strip()
    return re.sub(r"^void ", "", name)[:60] or "?"


def device_events(trace: dict) -> list[tuple[float, float, str]]:
    """(start µs, end µs, name) of every kernel, copy and memset, by start."""
    out = []
    for e in trace.get("traceEvents", []):
        cat = str(e.get("cat", "")).lower()
        if cat in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e:
            name = e.get("name", "?")
            if cat != "kernel":
                nbytes = e.get("args", {}).get("bytes")
                name = f"[{name}{'' if nbytes is None else f' {nbytes / 1e6:.1f} MB'}]"
            out.append((float(e["ts"]), float(e["ts"]) + float(e["dur"]), name))
    return sorted(out)


def report(events: list[tuple[float, float, str]], top: int) -> None:
    if not events:
        print("no device events recorded (CUPTI saw nothing)")
        return
    busy = 0.0
    end = events[0][0]
    gaps = []
    by_cat: dict[str, float] = defaultdict(float)
    prev = "(start)"
    for s, e, name in events:
        if s > end:
            gaps.append((s - end, prev, name))
        busy += max(0.0, e - max(s, end))
        end = max(end, e)
        prev = name
        by_cat["copies" if name.startswith("[") else "kernels"] += e - s
    span = end - events[0][0]
    idle = sum(g for g, _, _ in gaps)
    print(
        f"device timeline: {len(events)} activities over {span / 1e3:.1f} ms: busy "
        f"{busy / 1e3:.1f} ms, idle {idle / 1e3:.1f} ms in {len(gaps)} gaps; kernels "
        f"{by_cat['kernels'] / 1e3:.1f} ms, copies {by_cat['copies'] / 1e3:.1f} ms"
    )
    buckets = [(0, 5), (5, 20), (20, 100), (100, 1000), (1000, 1e12)]
    for lo, hi in buckets:
        sel = [g for g, _, _ in gaps if lo <= g < hi]
        print(f"  gaps {lo}-{hi if hi < 1e12 else 'inf'} µs: {len(sel)}, {sum(sel) / 1e3:.1f} ms")
    after: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for g, _, nxt in gaps:
        after[family(nxt)][0] += g
        after[family(nxt)][1] += 1
    print("idle by the activity that ends it (ms, gaps):")
    for name, (t, n) in sorted(after.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"  {t / 1e3:8.2f} {n:6d}  {name}")
    print(f"the {top} longest gaps (µs: before -> after):")
    for g, p, n in sorted(gaps, reverse=True)[:top]:
        print(f"  {g:9.1f}  {family(p)} -> {family(n)}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("reference")
    p.add_argument("query")
    p.add_argument("--hspz-args", default="")
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--trace", help="keep the chrome trace here")
    a = p.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile

    extra = shlex.split(a.hspz_args)
    with tempfile.TemporaryDirectory(prefix="gpu-timeline-") as tmp:
        run_once(a.reference, a.query, Path(tmp) / "warm", extra)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            text = run_once(a.reference, a.query, Path(tmp) / "traced", extra)
        path = a.trace or str(Path(tmp) / "trace.json")
        prof.export_chrome_trace(path)
        trace = json.loads(Path(path).read_text())
    for line in text.splitlines():
        if line.startswith("unit ledger:\t") or line.startswith("digest"):
            print(line)
    report(device_events(trace), a.top)


if __name__ == "__main__":
    main()
