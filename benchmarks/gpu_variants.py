"""Claim: GPU filter variants side by side on one pair, in one process (BENCHMARKS.md, "GPU ns per
seed hit", issue 27).

    python3 benchmarks/gpu_variants.py REF QUERY [--variants base,NAME=VALUE[+NAME=VALUE]]
        [--rounds 3] [--passes 3] [--json FILE] [--breakdown] [--hspz-args "-B 250M"]

A variant is `base` (the environment as given) or settings joined by `+`: environment
variables (knobs, or a switch a trial kernel reads; issue 27's trials were HSPZ_GPU_FILTER
values, `git log`), `gpu.NAME=VALUE`, a constant of `hspz.engine.gpu` for the pass, or
`sys.switchinterval=SECONDS`, how long a Python thread keeps the GIL while another waits
(`sys.setswitchinterval`; 0.005 by default): the launching thread waits for the host halves'
threads at each handoff.
Reads the pair once, runs one untimed pass per variant (compiles its kernels), then ROUNDS
rounds, each variant in turn, PASSES timed passes each (`hspz.tools.bench.
one_pass`: a whole `run` into a scratch folder, ledger GPU time and digest per pass).  Prints one
line per variant: median ns/hit of ledger GPU time and of the passes' wall, every pass, and the
digests (every pass of every variant must agree, or the script exits 1).  --breakdown adds one
pass per variant with a CUDA event pair around every project kernel launch: device ms per kernel
name (the rest of the ledger is CuPy's own kernels and host gaps), and a line of every launch's
start and end (`timeline`).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hspz import cli  # noqa: E402
from hspz.engine import backends  # noqa: E402
from hspz.planning.inputs import read_inputs  # noqa: E402
from hspz.tools import bench  # noqa: E402

_SET: set[str] = set()  # the environment variables the variants set
_MODULE: dict[str, object] = {}  # hspz.engine.gpu's constants the variants set, as they were
_SWITCH = sys.getswitchinterval()  # the interpreter's, restored before each variant


def apply(variant: str) -> None:
    """Undo the last variant's settings, then set `variant`'s (`base`, or NAME=VALUE[+...]; a
    NAME `gpu.X` sets the constant X of `hspz.engine.gpu`, e.g. gpu.PIECE=97, or a switch
    gpu.MINUS_ON_DEVICE=1; `sys.switchinterval` the interpreter's switch interval)."""
    from hspz.engine import gpu

    for name in _SET:
        os.environ.pop(name, None)
    for attr, value in _MODULE.items():
        setattr(gpu, attr, value)
    sys.setswitchinterval(_SWITCH)
    for setting in [] if variant == "base" else variant.split("+"):
        name, eq, value = setting.partition("=")
        if not eq:
            raise SystemExit(f"gpu_variants: variant {variant!r}: not base or NAME=VALUE")
        if name == "sys.switchinterval":
            sys.setswitchinterval(float(value))
        elif name.startswith("gpu."):
            attr = name.removeprefix("gpu.")
            was = _MODULE.setdefault(attr, getattr(gpu, attr))
            flag = value in ("1", "True")  # bool("0") would be True
            setattr(gpu, attr, flag if isinstance(was, bool) else type(was)(value))
        else:
            _SET.add(name)
            os.environ[name] = value


def one(options, inputs, engine, variant: str, kind: str) -> dict:
    """One pass under `variant` (`apply`)."""
    apply(variant)
    rec = bench.one_pass(options, inputs, engine, kind)
    rec["variant"] = variant
    rec["ns_per_hit_wall"] = round(rec["wall_s"] * 1e9 / rec["hits"], 4) if rec["hits"] else None
    return rec


def breakdown(options, inputs, engine, variant: str) -> dict[str, float]:
    """Device ms per project kernel name over one pass (events around each launch, on the
    stream it goes to).  Under gpu.AHEAD the filter's stream and the launching stream overlap:
    a kernel's figure then includes its wait for SM slots, and the "rest" can go negative."""
    import cupy as cp

    from hspz.engine import gpu

    log = []
    plain = gpu._kernel

    class Timed:
        """The kernel, its launches between two events (its attributes as the kernel's)."""

        def __init__(self, f, name):
            self.f, self.name = f, name

        def __getattr__(self, attr):
            return getattr(self.f, attr)

        def __call__(self, *args, **kw):
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            self.f(*args, **kw)
            stop.record()
            log.append((self.name, start, stop, cp.cuda.get_current_stream().ptr))

    def timed(shape, module, name):
        return Timed(plain(shape, module, name), name)

    gpu._kernel = timed
    try:
        rec = one(options, inputs, engine, variant, "breakdown")
    finally:
        gpu._kernel = plain
    cp.cuda.Device().synchronize()
    ms = defaultdict(float)
    for name, start, stop, _ in log:
        ms[name] += cp.cuda.get_elapsed_time(start, stop)
    ms["(ledger)"] = rec["engine_ms"]
    ms["(rest: CuPy kernels, gaps)"] = rec["engine_ms"] - sum(
        v for k, v in ms.items() if not k.startswith("(")
    )
    if log:
        print(f"timeline {variant}: " + timeline(log), flush=True)
    return dict(ms)


def timeline(log: list) -> str:
    """Each project kernel launch of a breakdown pass as name[stream]@start-end in ms from the
    first launch's start, in launch order (streams lettered as they first launch)."""
    import cupy as cp

    t0 = log[0][1]
    letters: dict[int, str] = {}
    return " ".join(
        f"{name}[{letters.setdefault(ptr, 'abcdefgh'[min(len(letters), 7)])}]@"
        f"{cp.cuda.get_elapsed_time(t0, start):.1f}-{cp.cuda.get_elapsed_time(t0, stop):.1f}"
        for name, start, stop, ptr in log
    )


def phases(options, inputs, engine, variant: str) -> dict[str, float]:
    """Wall ms per `_Group` step over one pass, the device synchronised around each step (so
    the sum exceeds the ledger: the steps no longer overlap the host halves)."""
    import time

    import cupy as cp

    from hspz.engine import gpu

    ms = defaultdict(float)
    saved = {}
    steps = (
        "__init__",
        "semantic_chunks",
        "use_chunks",
        "survivors",
        "filter",
        "walk",
        "finish",
        "_block_seeds",
    )

    def wrap(name, f):
        def call(*args, **kw):
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            out = f(*args, **kw)
            cp.cuda.Device().synchronize()
            ms[name] += (time.perf_counter() - t0) * 1e3
            return out

        return call

    for name in steps:
        saved[name] = getattr(gpu._Group, name)
        setattr(gpu._Group, name, wrap(name, saved[name]))
    try:
        rec = one(options, inputs, engine, variant, "phases")
    finally:
        for name, f in saved.items():
            setattr(gpu._Group, name, f)
    ms["(ledger)"] = rec["engine_ms"]
    return dict(ms)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reference")
    ap.add_argument("query")
    ap.add_argument("--variants", default="base")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--breakdown", action="store_true")
    ap.add_argument("--hspz-args", default="")
    a = ap.parse_args()
    ns = cli.build_parser().parse_args(
        ["benchmark", "-r", a.reference, "-q", a.query, *shlex.split(a.hspz_args)]
    )
    options = cli.options_from_args(ns)
    engine = backends.select(options)
    inputs = read_inputs(options, a.reference, a.query)
    variants = a.variants.split(",")
    records = [one(options, inputs, engine, v, "cold") for v in variants]
    for r in range(a.rounds):
        for v in variants:
            for _ in range(a.passes):
                rec = one(options, inputs, engine, v, "timed")
                rec["round"] = r
                records.append(rec)
                print(
                    f"round {r} {v}: {rec['engine_ms']:.1f} ms ledger, {rec['wall_s']:.3f} s "
                    f"wall, {rec['ns_per_hit']} ns/hit, digest {rec['digest']}",
                    flush=True,
                )
    if a.json:
        with open(a.json, "a") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in records)
    if a.breakdown:
        for v in variants:
            ms = breakdown(options, inputs, engine, v)
            print(
                f"breakdown {v}: "
                + ", ".join(f"{k} {x:.1f}" for k, x in sorted(ms.items(), key=lambda kv: -kv[1]))
            )
            ms = phases(options, inputs, engine, v)
            print(
                f"phases {v} (synchronised): "
                + ", ".join(f"{k} {x:.1f}" for k, x in sorted(ms.items(), key=lambda kv: -kv[1]))
            )
    digests = {r["digest"] for r in records}
    for v in variants:
        timed = [r for r in records if r["variant"] == v and r["pass_kind"] == "timed"]
        if not timed:
            continue
        ns_gpu = [r["ns_per_hit"] for r in timed]
        ns_wall = [r["ns_per_hit_wall"] for r in timed]
        print(
            f"{v}: ns/hit median {statistics.median(ns_gpu):.4f} (all "
            f"{' '.join(f'{x:.4f}' for x in sorted(ns_gpu))}); wall ns/hit median "
            f"{statistics.median(ns_wall):.4f}; {timed[0]['hits']} hits; "
            f"digests {sorted({r['digest'] for r in timed})}"
        )
    if len(digests) != 1:
        print(f"DIGESTS DIFFER: {sorted(digests)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
