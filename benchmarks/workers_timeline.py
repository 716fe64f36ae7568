"""Where a `hspZ run` spends its time outside the units, as seen from the calling process: when
the records were shared with the worker processes, when each unit's results arrived and how
long the emitter took to stage them, when each reference bin's digest lines were merged, and
how long publishing and closing the pool (waiting for the workers' exit) took.  Runs
`hspZ run ARGS` in this process with those functions wrapped; prints `timeline:` lines (seconds
since the command started) to stderr after the run's own output.

    python benchmarks/workers_timeline.py -r REF -q QUERY -B 250M --gpus 2 -o OUT --time

Works on the CPU backend too (`--backend cpu`).  The wrapped names exist since session 7, so
an older copy of the package can be timed the same way (PYTHONPATH=that copy).
"""

from __future__ import annotations

import sys
import time

from hspz import cli, emit, workers

T0 = time.perf_counter()
EVENTS: list[tuple[float, float, str]] = []


def _wrap(owner, name: str, label) -> None:
    """Record (start, end, label(args)) of every call of owner.name."""
    real = getattr(owner, name, None)
    if real is None:
        print(f"timeline: {owner.__name__}.{name} not found; not timed", file=sys.stderr)
        return

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            EVENTS.append((start - T0, time.perf_counter() - T0, label(*args)))

    setattr(owner, name, timed)


def main(argv: list[str]) -> int:
    _wrap(workers, "share", lambda *a: "records shared")
    _wrap(workers, "_collect", lambda *a: "every worker reported")
    _wrap(workers.Pool, "close", lambda *a: "pool closed (workers joined)")
    _wrap(emit.Emitter, "add", lambda self, r: f"unit {r.ordinal} (R{r.ref_bin}) staged")
    _wrap(emit.LineDigest, "seal", lambda self, g: f"R{g} sealed: digest merge")
    _wrap(emit.Emitter, "finish", lambda *a: "publish (digest, renames)")
    status = cli.main(["run", *argv])
    end = time.perf_counter() - T0
    for start, stop, what in sorted(EVENTS):
        print(f"timeline: {start:9.3f} -> {stop:9.3f} s ({stop - start:7.3f} s) {what}",
              file=sys.stderr)
    print(f"timeline: {end:9.3f} s command returned (status {status})", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
