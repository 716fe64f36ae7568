"""Replaying batches of unit results (`hspZ merge`'s results files) into a query-list run's
`Emitters` with each job staged on a thread of its own, observably as `Emitters.add` of every
result in turn: the same files, digests and counts, the jobs published in the same order on the
calling thread, the same ledger rows in the same order, and on a failure the same jobs published
and the same (first) error raised.

Each job's emitter is independent (its stage folder, digest, counts), so a batch's results are
grouped by job and each job's are staged, in batch order, on the pool.  Its ledger rows wait,
keyed by the result whose add would have emitted them, and join the ledger in that order at the
end.  The calling thread publishes a
job once every job has staged every result the sequential replay would have added before that
job's last one (`_Progress.wait_past`): had one of them failed, the sequential replay would have
stopped before this publish, and so does this one.  A failure stops every job at its next result
after it; the calling thread waits for every job to stop, then raises the first failure in batch
order (as the sequential replay would have met it).  A Ctrl-C or SIGTERM (on the calling thread)
stops every job likewise before it is raised, so the caller's `Emitters.abort` finds no thread
still staging.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait

from hspz.engine.contract import UnitResult
from hspz.run.execute import Emitters

REPLAY_THREADS = 8  # jobs staged at once, at most (each stages a unit's files on STAGE_THREADS)
_END = float("inf")


def replay_threads(jobs: int, threads: int = 0) -> int:
    """Jobs staged at once: `threads`, or (0) one per job up to the cores and REPLAY_THREADS."""
    return max(1, min(jobs, threads or min(os.cpu_count() or 1, REPLAY_THREADS)))


def replay(emitters: Emitters, batches: Iterable[list[UnitResult]], threads: int = 0) -> None:
    """`emitters.add` of every result of every batch, in order; with more than one thread and a
    query-list run's jobs, each job's results staged on a thread of its own (module docstring)."""
    threads = replay_threads(len(emitters.jobs), threads)
    how = emitters.how
    waits = how.verify is not None or how.progress is not None  # not made for threads
    if threads == 1 or not emitters.query_list or waits:
        for batch in batches:
            for result in batch:
                emitters.add(result)
        return
    emitters.keyed = [[] for _ in emitters.jobs]
    try:
        first = 0
        with ThreadPoolExecutor(threads, thread_name_prefix="hspz-replay") as pool:
            for batch in batches:
                _replay_batch(emitters, batch, first, pool)
                first += len(batch)
        # rows of one add are one job's, in emission order: a stable sort by add restores them
        rows = sorted((r for job in emitters.keyed for r in job), key=lambda r: r[0])
        emitters.summary.ledger += [row for _, row in rows]
    finally:
        emitters.keyed = None


def _replay_batch(
    emitters: Emitters, batch: list[UnitResult], first: int, pool: ThreadPoolExecutor
) -> None:
    """One batch (its results the `first`, `first + 1`, ... of the replay): every job staged
    on the pool, the jobs it completes published in the order their last results come."""
    items: dict[int, list[tuple[int, UnitResult]]] = {}
    for i, result in enumerate(batch, first):
        items.setdefault(result.job, []).append((i, result))
    progress = _Progress({j: its[0][0] for j, its in items.items()})
    futures: list[Future] = [
        pool.submit(_stage_job, emitters, j, its, progress) for j, its in items.items()
    ]
    try:
        for j in sorted(items, key=lambda j: items[j][-1][0]):
            if emitters.left[j] == len(items[j]):  # its last result is in this batch
                progress.wait_past(items[j][-1][0])
                emitters.left[j] = 0
                emitters.finish(j)
        progress.wait_past(_END)
    except BaseException:
        progress.halt(-1)
        _wait_through_interrupts(futures)
        raise
    for j, its in items.items():
        if emitters.left[j]:
            emitters.left[j] -= len(its)


def _wait_through_interrupts(futures: list[Future]) -> None:
    """Until every job's thread has stopped (each after the unit it is staging), a repeated
    Ctrl-C or SIGTERM included: the caller's `Emitters.abort` then removes stages no thread
    still writes into (one raced by a thread was left with files and no mark)."""
    while True:
        try:
            wait(futures)
            return
        except BaseException:  # the interrupt being handled is raised once they have stopped
            continue


def _stage_job(
    emitters: Emitters, j: int, its: list[tuple[int, UnitResult]], progress: _Progress
) -> None:
    """Job j's results of a batch staged in batch order, until one fails or the replay halts."""
    try:
        for n, (i, result) in enumerate(its):
            if not progress.may(i):
                return
            try:
                emitters.stage(result, i)
            except BaseException as exc:
                progress.fail(i, exc)
                return
            progress.advance(j, its[n + 1][0] if n + 1 < len(its) else _END)
    finally:
        progress.end(j)


class _Progress:
    """How far each job of a batch has staged, and the failures, shared under one condition."""

    def __init__(self, first: dict[int, int]):
        self.cond = threading.Condition()
        self.next: dict[int, float] = dict(first)  # job -> index of its next result to stage
        self.ended: set[int] = set()  # jobs that staged all, failed or halted
        self.failed: dict[int, BaseException] = {}  # index -> what staging it raised
        self.stop: float = _END  # results after this index are not staged

    def may(self, i: int) -> bool:
        with self.cond:
            return i < self.stop

    def advance(self, j: int, i: float) -> None:
        with self.cond:
            self.next[j] = i
            self.cond.notify_all()

    def fail(self, i: int, exc: BaseException) -> None:
        with self.cond:
            self.failed[i] = exc
            self.stop = min(self.stop, i)
            self.cond.notify_all()

    def halt(self, i: float) -> None:
        with self.cond:
            self.stop = min(self.stop, i)

    def end(self, j: int) -> None:
        with self.cond:
            self.ended.add(j)
            self.cond.notify_all()

    def wait_past(self, i: float) -> None:
        """Until every job has staged every result up to index i or ended; then the first
        failure, when one is at or before i, raised."""
        with self.cond:
            self.cond.wait_for(
                lambda: all(k in self.ended or at > i for k, at in self.next.items())
            )
            if self.failed and min(self.failed) <= i:
                raise self.failed[min(self.failed)]
