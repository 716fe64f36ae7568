"""`hspZ work`'s formatting of its own units: each finished unit's segments files are formatted
on threads while the worker still runs, as `run` formats its units beside its workers, and so
is the digest of every job whose units all run on this worker.  `hspZ merge` then writes those
lines as they are and takes those digests (`emit.Emitter.known`), where it formatted, sorted
and hashed every line after the work jobs were done.

    finished unit -> its files' lines (`emit.render_unit`) -> result.rendered
                  -> (a job held whole) sorted runs into the job's digest (`emit.unit_digest`)
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor

from hspz.engine.contract import UnitResult
from hspz.formats.manifest import Manifest
from hspz.run.digest import LineDigest, sorted_lines
from hspz.run.emit import render_unit, table_lookup, unit_digest

RENDER_THREADS = 2  # beside the worker's own threads; the lines of a unit are formatted and
# made sorted runs in numba's loops and numpy's sort, which release the GIL
DIGEST_THREADS = 2  # each job's digest merges its runs on at most these


class Renderer:
    """Formats every unit it is given on a pool of threads (`add`), and makes the digest of
    each job whose every unit is among `units`; `close` waits for them all."""

    def __init__(
        self, manifests: list[Manifest], units: list[tuple[int, int]], threads: int = 0
    ) -> None:
        """`manifests`: every job's, by job index; `units`: this worker's (job, ordinal)."""
        self.tables = [table_lookup(m) for m in manifests]
        held = Counter(j for j, _ in units)
        self.jobs: dict[int, tuple[LineDigest, Counter]] = {
            j: unit_digest(m.plan.units, self.tables[j], DIGEST_THREADS)
            for j, m in enumerate(manifests)
            if held[j] == len(m.plan.units)
        }
        self.locks = {j: threading.Lock() for j in self.jobs}
        self.pool = ThreadPoolExecutor(threads or RENDER_THREADS, thread_name_prefix="hspz-render")
        self.futures: list[Future] = []

    def add(self, result: UnitResult) -> None:
        """Format `result`'s files (into `result.rendered`) on the pool."""
        self.futures.append(self.pool.submit(self._render, result))

    def _render(self, result: UnitResult) -> None:
        result.rendered = render_unit(result, self.tables[result.job])
        job = self.jobs.get(result.job)
        if job is None:
            return
        runs = [sorted_lines(data) for _, data in result.rendered]
        digest, left = job
        with self.locks[result.job]:
            for run in runs:
                digest.add_sorted(run, result.ref_bin)
            left[result.ref_bin] -= 1
            if not left[result.ref_bin]:
                digest.seal(result.ref_bin)

    def close(self) -> dict[int, str]:
        """Every unit formatted (the first failure raised): the digest of each job held whole."""
        for future in self.futures:
            future.result()
        self.shutdown()
        return {j: digest.hexdigest() for j, (digest, _) in self.jobs.items()}

    def shutdown(self) -> None:
        """The pool stopped: units not yet begun are dropped, those begun are waited for."""
        self.pool.shutdown(wait=True, cancel_futures=True)
