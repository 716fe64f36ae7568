"""`hspZ work`'s formatting of its own units: each finished unit's segments files are formatted
on threads while the worker still runs, as `run` formats its units beside its workers, and so
is the digest of every job whose units all run on this worker.  `hspZ merge` then writes those
lines as they are and takes those digests (`emit.Emitter.known`), where it formatted, sorted
and hashed every line after the work jobs were done.

    finished unit -> its files' lines (`emit.render_unit`) -> result.rendered
                  -> (a job held whole) sorted runs into the job's digest (`emit.UnitDigest`)
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

from hspz.core.errors import HspzError, RunError
from hspz.engine.contract import UnitResult
from hspz.formats.manifest import Manifest
from hspz.run.digest import sorted_lines
from hspz.run.emit import UnitDigest, jobs_held_whole, render_unit, table_lookup

RENDER_THREADS = 2  # beside the worker's own threads; the lines of a unit are formatted and
# made sorted runs in numba's loops and numpy's sort, which release the GIL
DIGEST_THREADS = 2  # each job's digest merges its runs on at most these


class RenderFailed(Exception):
    """A unit's formatting failed: raised through the worker to stop it (not an HspzError, so
    no job's name is prefixed); `Renderer.close` then raises the failure itself."""


class Renderer:
    """Formats every unit it is given on a pool of threads (`add`), and makes the digest of
    each job whose every unit is among `units`; `close` waits for them all."""

    def __init__(
        self, manifests: list[Manifest], units: list[tuple[int, int]], threads: int = 0
    ) -> None:
        """`manifests`: every job's, by job index; `units`: this worker's (job, ordinal)."""
        self.tables = [table_lookup(m) for m in manifests]
        whole = jobs_held_whole(units, [len(m.plan.units) for m in manifests])
        self.jobs: dict[int, UnitDigest] = {
            j: UnitDigest(manifests[j].plan.units, self.tables[j], DIGEST_THREADS)
            for j in sorted(whole)
        }
        self.locks = {j: threading.Lock() for j in self.jobs}
        self.pool = ThreadPoolExecutor(threads or RENDER_THREADS, thread_name_prefix="hspz-render")
        self.futures: list[Future] = []
        self.failed = threading.Event()  # a unit's formatting failed

    def add(self, result: UnitResult) -> None:
        """Format `result`'s files (into `result.rendered`) on the pool; RenderFailed once a
        unit's formatting has failed, so that the worker stops (`close` raises the failure)."""
        if self.failed.is_set():
            raise RenderFailed
        future = self.pool.submit(self._render, result)
        future.add_done_callback(self._check)
        self.futures.append(future)

    def _check(self, future: Future) -> None:
        if not future.cancelled() and future.exception() is not None:
            self.failed.set()

    def _render(self, result: UnitResult) -> None:
        """One unit formatted; any failure one RunError line naming the unit (a traceback from
        a thread, before)."""
        try:
            self._render_unit(result)
        except HspzError:
            raise
        except Exception as exc:
            raise RunError(
                f"work: formatting unit {result.ordinal} of job {result.job + 1} failed "
                f"({type(exc).__name__}{f': {exc}' if str(exc) else ''})"
            ) from exc

    def _render_unit(self, result: UnitResult) -> None:
        result.rendered = render_unit(result, self.tables[result.job])
        job = self.jobs.get(result.job)
        if job is None:
            return
        runs = [sorted_lines(data) for _, data in result.rendered]
        with self.locks[result.job]:
            job.add(result.ref_bin, runs)

    def close(self) -> dict[int, str]:
        """Every unit formatted (the first failure raised): the digest of each job held whole."""
        for future in self.futures:
            future.result()
        self.shutdown()
        return {j: digest.hexdigest() for j, digest in self.jobs.items()}

    def shutdown(self) -> None:
        """The pool stopped: units not yet begun are dropped, those begun are waited for."""
        self.pool.shutdown(wait=True, cancel_futures=True)
