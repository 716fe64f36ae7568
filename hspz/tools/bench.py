"""`hspZ benchmark`: cold and warm timed passes of one single-bin pair, JSON records.

The cold pass includes kernel compilation and the seed-table build; warm-up passes are run and
dropped; each timed pass is one full `run` into a scratch directory.  Every pass must produce the
same HSP digest, or the benchmark fails: a fast wrong answer is not a result.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time

from hspz.core import durable
from hspz.core.errors import RunError, UsageError
from hspz.core.options import Options
from hspz.engine import backends
from hspz.engine.contract import Backend
from hspz.planning.inputs import Inputs, read_inputs
from hspz.run.driver import drive_given


def one_pass(options: Options, inputs: Inputs, engine: Backend, kind: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="hspz-bench-") as tmp:
        t0 = time.perf_counter()
        summary = drive_given(options, inputs, tmp, engine)
        wall = time.perf_counter() - t0
    engine_ms = sum(r.engine_ms for r in summary.results)
    return dict(
        pass_kind=kind,
        wall_s=round(wall, 6),
        engine_ms=round(engine_ms, 3),
        backend=engine.name,
        seeds=summary.seeds,
        hits=summary.hits,
        raw_hsps=summary.raw_hsps,
        hsps=summary.hsps,
        digest=summary.digest,
        ns_per_hit=round(engine_ms * 1e6 / summary.hits, 4) if summary.hits else None,
    )


def main(
    options: Options,
    reference: str,
    query: str,
    warmup: int,
    iterations: int,
    json_path: str | None,
) -> int:
    engine = backends.select(options)
    inputs = read_inputs(options, reference, query)
    if len(inputs.plan.ref_bins) != 1 or len(inputs.plan.query_bins) != 1:
        raise UsageError("benchmark needs a single-bin pair (raise -B / --query-block-size)")
    records = [one_pass(options, inputs, engine, "cold")]
    records += [one_pass(options, inputs, engine, "warmup") for _ in range(warmup)]
    records += [one_pass(options, inputs, engine, "timed") for _ in range(iterations)]
    digests = {r["digest"] for r in records}
    if len(digests) != 1:
        raise RunError(f"benchmark: passes disagree on the HSP digest: {sorted(digests)}")
    timed = [r for r in records if r["pass_kind"] == "timed"]
    for r in records:
        print(json.dumps(r), file=sys.stdout)
    if json_path:
        durable.append_text(json_path, "".join(json.dumps(r) + "\n" for r in records), "--json")
    med_wall = statistics.median(r["wall_s"] for r in timed)
    med_engine = statistics.median(r["engine_ms"] for r in timed)
    print(
        f"benchmark: median of {len(timed)}: wall {med_wall:.3f} s, engine {med_engine:.1f} ms, "
        f"{timed[0]['hits']} hits, digest {timed[0]['digest']}",
        file=sys.stderr,
    )
    return 0
