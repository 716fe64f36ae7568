"""The worker processes: one per scheduled worker (multiprocessing spawn, so each can own a CUDA
context), the records shared through one block of shared memory, each job down a pipe of its own
and results back as UnitResult.to_bytes() images on one queue; one worker runs in the calling
process with its results handed to the sink on a thread of their own. Nothing outlives the
caller: each process dies with its parent (libc.die_with_parent), and the shared block's name is
unlinked as soon as every worker has attached."""

from __future__ import annotations

import io
import os
import queue as queue_module
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from multiprocessing import shared_memory
from typing import TYPE_CHECKING

import numpy as np

from hspz.core.errors import HspzError, InputError, RunError, out_of_memory
from hspz.engine.contract import Backend, UnitResult
from hspz.io.records import Record
from hspz.run.libc import die_with_parent
from hspz.run.worker import PROGRESS_S, Sink, WorkerJob, WorkerReport, run_worker

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess
    from multiprocessing.queues import Queue


@dataclass
class SharedRecords:
    """Records whose bases live in a shared-memory block (names and offsets pickled)."""

    shm_name: str
    names: list[str]
    offsets: list[int]
    lengths: list[int]
    _shm: shared_memory.SharedMemory | None = None

    def attach(self) -> SharedRecords:
        self._shm = shared_memory.SharedMemory(name=self.shm_name)
        return self

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, i: int) -> Record:
        assert self._shm is not None, "attach() first"
        buf = np.ndarray((self.lengths[i],), np.uint8, self._shm.buf, self.offsets[i])
        return Record(self.names[i], buf)

    def __getstate__(self) -> dict:
        return dict(self.__dict__, _shm=None)


def share(
    sides: Sequence[Sequence[Record]],
) -> tuple[shared_memory.SharedMemory, list[SharedRecords]]:
    """Copy every record's bases into one shared-memory block."""
    total = sum(len(r) for side in sides for r in side)
    shm = shared_memory.SharedMemory(create=True, size=max(total, 1))
    try:
        return shm, _fill(shm, sides, total)
    except BaseException:  # SIGTERM while copying, say: the block is not left behind
        shm.unlink()  # the name goes now, the memory with the last view
        with suppress(BufferError):
            shm.close()
        raise


def _fill(
    shm: shared_memory.SharedMemory, sides: Sequence[Sequence[Record]], total: int
) -> list[SharedRecords]:
    block = np.ndarray((total,), np.uint8, shm.buf)
    out, copies, at = [], [], 0
    for side in sides:
        offsets = []
        for rec in side:
            copies.append((at, rec.seq))
            offsets.append(at)
            at += len(rec)
        out.append(SharedRecords(shm.name, [r.name for r in side], offsets, [len(r) for r in side]))
    try:
        with ThreadPoolExecutor(min(8, os.cpu_count() or 1)) as pool:  # copies release the GIL
            list(pool.map(_copy_into, [block] * len(copies), *zip(*copies, strict=True)))
    finally:
        del block  # the block must hold no exported view when it is closed
    return out


# what a worker reads records from: a list, or (in a worker process) the shared block
Records = Sequence[Record] | SharedRecords


def _copy_into(block: np.ndarray, at: int, seq: np.ndarray) -> None:
    block[at : at + len(seq)] = seq


def _child(job: WorkerJob, ref: SharedRecords, qry: SharedRecords, out: Queue) -> None:
    """A worker process: run the job, stream results, then report (or report the failure)."""
    try:
        ref.attach()
        qry.attach()
        out.put(("attached", job.worker))

        def send(result: UnitResult, extras: object) -> None:
            out.put(("unit", job.worker, result.to_bytes(), extras))

        last = [0.0]

        def tell(key: object, share: float, hits: int) -> None:
            now = time.perf_counter()
            if now - last[0] >= PROGRESS_S:
                last[0] = now
                out.put(("progress", job.worker, key, share, hits))

        out.put(("done", job.worker, run_worker(job, ref, qry, send, tell)))
    except BaseException as exc:  # reported to the parent, which turns it into one line
        detail = traceback.format_exc() if os.environ.get("HSPZ_DEBUG") == "1" else ""
        message = (
            str(exc)
            if isinstance(exc, HspzError)
            else out_of_memory(exc) or f"{type(exc).__name__}: {exc}"
        )
        out.put(("error", job.worker, message, detail, getattr(exc, "status", 1)))


class Pool:
    """Worker processes that start before their jobs exist.  `hspZ run` starts one per
    scheduled worker as soon as the schedule is made, so that spawning Python, importing numpy
    and the engine (CuPy and the device's context, or numba: `warm_worker`) overlap the dumps
    and the copy of the records into shared memory; `run` then hands each its job.  Processes
    left without a job stop as soon as the jobs are handed out.  Once every worker has
    reported, the rest of a process's exit (the kernel tearing down its CUDA context and
    memory) is no longer waited for: `close`, at the end of the pool's `with`, joins them, so
    their exit overlaps the caller's publishing.

    A job goes down a pipe of its own (the parent keeps only the sending end: a worker that
    died makes the send fail instead of wait); results come back on one queue.  Make the pool
    on a thread that outlives it (the main thread): the kernel's parent-death signal follows
    the thread that started a process, not the whole process."""

    def __init__(self, n: int, engine: Backend, numba: bool = False):
        import multiprocessing

        mp = multiprocessing.get_context("spawn")
        self.out: Queue | None = mp.Queue()
        pipes = [mp.Pipe(duplex=False) for _ in range(n)]  # (receiving, sending) ends
        self.inboxes = [send for _, send in pipes]
        self.procs = [
            mp.Process(
                target=_pooled, args=(engine, k, recv, self.out, numba, os.getpid()), daemon=True
            )
            for k, (recv, _) in enumerate(pipes)
        ]
        self.handed = 0
        self.size = n
        self.shm: shared_memory.SharedMemory | None = None
        self.unlinked = False  # the shared block's name is gone (its memory stays mapped)
        self.started = 0  # procs[:started] were started
        try:
            for p, (recv, _) in zip(self.procs, pipes, strict=True):
                p.start()
                self.started += 1
                recv.close()  # the child has its own copy
        except BaseException:  # SIGTERM, say: stop what started
            self.close(failed=True)
            raise

    def __len__(self) -> int:
        return self.size

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        self.close(failed=kind is not None)

    def run(
        self,
        jobs: Sequence[WorkerJob],
        ref_records: Sequence[Record],
        qry_records: Sequence[Record],
        sink: Sink,
        progress: Callable | None = None,
    ) -> list[WorkerReport]:
        """Run jobs[k] on process k (k = its worker number); results go to `sink`.  Returns
        when every worker has reported; `close` waits for their exit."""
        assert self.out is not None, "the pool is closed"
        self.shm, (ref, qry) = share([ref_records, qry_records])
        try:
            for k, job in enumerate(jobs):
                _hand(k, self.inboxes[k], (job, ref, qry))
            self.handed = len(jobs)
            self._stop(range(self.handed, self.started))
            return _collect(
                self.procs[: len(jobs)], self.out, sink, len(jobs), self.unlink, progress
            )
        except BaseException:
            self.close(failed=True)
            raise

    def close(self, failed: bool = False) -> None:
        """Wait for the processes with a job to exit and stop the rest; after a failure, stop
        them all at once.  Then free the shared records, the pipes and the queue."""
        self._stop(range(self.started) if failed else range(self.handed, self.started))
        for p in self.procs[: self.started]:
            p.join()
        if self.shm is not None:
            self.unlink()
            self.shm.close()
            self.shm = None
        for inbox in self.inboxes:
            inbox.close()
        if self.out is not None:
            # the parent never puts on it, so it has no feeder thread to wait for
            self.out.close()
            self.out.join_thread()
        # dropped now, so the queue's semaphores are unlinked now: `entry` leaves through
        # os._exit, which skips multiprocessing's exit hooks, and the resource tracker would
        # warn of 'leaked semaphore objects' (a process object keeps its arguments)
        self.out, self.inboxes, self.procs, self.started = None, [], [], 0

    def unlink(self) -> None:
        """Remove the shared block's name (every worker has attached, or the pool is closing);
        the memory lives on in each mapping."""
        if self.shm is not None and not self.unlinked:
            self.shm.unlink()
            self.unlinked = True

    def _stop(self, which: Iterable[int]) -> None:
        """Terminate processes `which` (nothing to lose: a failed run, or no job)."""
        for k in which:
            if self.procs[k].is_alive():
                self.procs[k].terminate()


def _hand(worker: int, inbox: Connection, message: object) -> None:
    try:
        inbox.send(message)
    except OSError as exc:  # BrokenPipeError: the process is gone
        raise RunError(
            f"worker {worker} exited before its job was handed over ({exc.strerror or exc})"
        ) from exc


def _pooled(
    engine: Backend,
    worker: int,
    inbox: Connection,
    out: Queue,
    numba: bool = False,
    parent: int | None = None,
) -> None:
    """A pooled worker process: die with `parent`; start the device worker `worker` will most
    likely use on the backend `engine` (its `warm_worker`), and load numba when asked (bins
    that large prepare with it), while the parent prepares the shared records; then run its
    job and exit as soon as its messages are in the pipe (the parent waits for the exit;
    finalising the interpreter and the CUDA context would add about 0.3 s).  Without a job
    (the parent closed the pipe) it just exits."""
    if parent is not None:
        die_with_parent(parent)
    try:
        engine.warm_worker(worker)
        if numba:
            from hspz.core import jit

            jit.load()
    except Exception:  # no CuPy here, say: the job's own first use reports it properly
        pass
    try:
        job, ref, qry = inbox.recv()
    except EOFError:
        os._exit(0)
    _child(job, ref, qry, out)
    out.close()
    out.join_thread()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_workers(
    jobs: Sequence[WorkerJob],
    ref_records: Sequence[Record],
    qry_records: Sequence[Record],
    sink: Sink,
    pool: Pool | None = None,
    progress: Callable | None = None,
) -> list[WorkerReport]:
    """Run every job; one in this process, several in one process each (`pool`'s, when it
    has enough, else processes spawned now).  `progress(key, share, hits)` hears of the
    seed batches of the units in flight (from worker processes at most every PROGRESS_S)."""
    if len(jobs) == 1:
        if pool is not None:
            pool.close()
        with _Handoff(sink) as handoff:
            return [run_worker(jobs[0], ref_records, qry_records, handoff, progress)]
    if pool is not None and len(pool) >= len(jobs):  # the caller's `with` closes it
        return pool.run(jobs, ref_records, qry_records, sink, progress)
    if pool is not None:
        pool.close()
    with Pool(len(jobs), jobs[0].engine) as fresh:
        return fresh.run(jobs, ref_records, qry_records, sink, progress)


class _Handoff:
    """A sink for the worker in this process: each result goes to `sink` on one thread of its
    own, in arrival order, so the worker starts its next unit while the last one is formatted
    and staged (as the emitter does for workers in processes).  A failure of `sink` stops the
    worker at its next result; leaving the block waits for every result to be taken."""

    def __init__(self, sink: Sink):
        self.sink = sink
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="emit")
        self.pending: list[Future] = []

    def __call__(self, result: UnitResult, extras: object) -> None:
        self._raise_done()
        self.pending.append(self.thread.submit(self.sink, result, extras))

    def _raise_done(self) -> None:
        while self.pending and self.pending[0].done():
            self.pending.pop(0).result()

    def __enter__(self) -> _Handoff:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        try:
            if kind is None:
                for f in self.pending:
                    f.result()
        finally:
            for f in self.pending:
                f.cancel()
            self.thread.shutdown(wait=True)


def _collect(
    procs: Sequence[BaseProcess],
    out: Queue,
    sink: Sink,
    n: int,
    attached: Callable[[], None] = lambda: None,
    progress: Callable | None = None,
) -> list[WorkerReport]:
    """Every worker's messages until each has reported; `attached()` once all n have attached
    the shared records; `progress` hears of the units in flight."""
    reports: dict[int, WorkerReport] = {}
    suspects: set[int] = set()
    joined = 0
    while len(reports) < n:
        try:
            msg = out.get(timeout=1.0)
        except queue_module.Empty:
            suspects = _check_alive(procs, reports, suspects)
            continue
        kind, worker = msg[0], msg[1]
        if kind == "attached":
            joined += 1
            if joined == n:
                attached()
        elif kind == "unit":
            sink(UnitResult.from_file(io.BytesIO(msg[2])), msg[3])
        elif kind == "progress":
            if progress is not None:
                progress(*msg[2:])
        elif kind == "done":
            reports[worker] = msg[2]
        else:
            if msg[3]:
                print(msg[3], end="", file=sys.stderr)
            failed = InputError if msg[4] == InputError.status else RunError  # edited input: 2
            raise failed(f"worker {worker} failed: {msg[2]}")
    return [reports[k] for k in sorted(reports)]


def _check_alive(procs: Sequence[BaseProcess], reports: dict, suspects: set[int]) -> set[int]:
    """Workers found dead twice in a row with nothing left on the queue died unreported."""
    dead = {k for k, p in enumerate(procs) if k not in reports and p.exitcode is not None}
    for k in sorted(dead & suspects):
        raise RunError(f"worker {k} died without reporting (exit code {procs[k].exitcode})")
    return dead
