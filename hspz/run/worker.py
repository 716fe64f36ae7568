"""Workers: each runs its visits of the schedule on its device and hands every UnitResult back.

One worker runs in the calling process, its results handed to the sink on a thread of their
own (`_Handoff`).  Several run one process each (multiprocessing "spawn", so each can own a CUDA
context; `hspZ run` starts the `Pool` once the schedule is made, one process per scheduled worker
and never more, so that their start-up, and numba's load when the bins are large, overlaps the
dumps and the copy of the records into shared memory): the records are shared through one block
of shared memory, each process picks its device (`hspz.engine.gpu.use_device`, when the GPU
engine offers it) and its share of `--threads`; each job goes down a pipe of its own, and results
travel back as `UnitResult.to_bytes()` images on one queue.
The caller's `sink` receives results in completion order; the emitter restores plan order.

Nothing outlives the caller: each worker process asks the kernel for SIGKILL when its parent
dies (`die_with_parent`, PR_SET_PDEATHSIG) and exits at once if the parent went before it asked;
the shared block's name is unlinked as soon as every worker reports that it has attached, so a
parent killed by SIGKILL leaves no /dev/shm segment (before that, multiprocessing's resource
tracker unlinks it once the parent and the workers are gone).

A worker builds each visited reference bin once and reuses it across the visit's query slice;
the current query bin is kept until a unit needs another one.  Its report carries the
lifecycle counts (builds, uploads, query swaps), its busy and finish times and its peak RSS.
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import io
import os
import queue as queue_module
import resource
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from multiprocessing import shared_memory

import numpy as np

from hspz.core.errors import HspzError, InputError, RunError
from hspz.engine.contract import Context, QueryBin, UnitResult, prepare_query, prepare_reference
from hspz.io.packing import Record
from hspz.planning.memory import Bins, Plan
from hspz.planning.schedule import Visit

Sink = Callable[[UnitResult, object], None]  # (result, hit histogram or None)


@dataclass(frozen=True)
class QuerySpec:
    """One job of a batch as a worker sees it: its query bins (record indices of its file) and
    the file, which the worker reads itself when it needs the job (the records are checked
    against the hash they were planned with)."""

    job: int  # index of the job in the batch
    query_bins: Bins
    path: str
    digest: str


@dataclass
class WorkerJob:
    """Everything one worker needs besides the records (picklable).

    A single query's worker has `queries` None: its visits cover that query's bins, whose
    records are handed to it.  A batch worker's visits cover the batch axis (`batch.BatchAxis`:
    every job's query bins in job order) and it reads each job's query file when a visit
    reaches the job.  `skip` holds (job, ordinal) of units already done (a resumed `work`)."""

    worker: int
    device: int
    visits: list[Visit]
    ctx: Context
    plan: Plan
    engine: str  # module name: hspz.engine.cpu or hspz.engine.gpu
    threads: int
    t0: float  # time.perf_counter() origin of the run (CLOCK_MONOTONIC: one clock for all)
    hit_stats: bool = False
    index: str | None = None  # an index folder: reference bins are loaded, not built
    queries: list[QuerySpec] | None = None
    progress: bool = False  # report each unit's finished seed batches (`progress.Progress`)
    skip: frozenset = frozenset()

    def locate(self, g: int) -> tuple[int, int]:
        """(job, query bin) of a visit's position g."""
        if self.queries is None:
            return 0, g
        from hspz.planning.joblist import BatchAxis

        return BatchAxis(tuple(len(s.query_bins) for s in self.queries)).locate(g)

    def ordinal(self, r: int, job: int, q: int) -> int:
        """The job's own ordinal of unit (reference bin r, its query bin q)."""
        n = len(self.plan.query_bins) if self.queries is None else \
            len(self.queries[job].query_bins)
        return r * n + q


@dataclass
class WorkerReport:
    worker: int
    device: int
    units: int = 0
    builds: int = 0
    loads: int = 0
    uploads: int = 0
    query_swaps: int = 0
    busy_ms: float = 0.0
    finished_ms: float = 0.0
    peak_rss_kib: int = 0
    phases: dict = field(default_factory=dict)
    # the engine's own phases, per phase [wall, CPU] seconds of each thread, over its units
    thread_phases: dict = field(default_factory=dict)


def add_thread_phases(rep: WorkerReport, phases: dict) -> None:
    """Add one unit's engine phases (`UnitResult.phases`) to the worker's, thread by thread."""
    for phase, threads in phases.items():
        acc = rep.thread_phases.setdefault(phase, [])
        acc.extend([0.0, 0.0] for _ in range(len(threads) - len(acc)))
        for k, (wall, cpu) in enumerate(threads):
            acc[k][0] += wall
            acc[k][1] += cpu


def load_engine(job: WorkerJob):
    """Import the engine, bind this process to its device and tell it its threads (each call
    only where the engine offers it)."""
    engine = importlib.import_module(job.engine)
    for name, value in (("use_device", job.device), ("set_threads", job.threads)):
        setter = getattr(engine, name, None)
        if setter is not None:
            setter(value)
    return engine


def _ms_since(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


def _add(phases: dict, name: str, t: float) -> None:
    phases[name] = phases.get(name, 0.0) + (time.perf_counter() - t)


def run_worker(job: WorkerJob, ref_records: Sequence[Record], qry_records: Sequence[Record],
               sink: Sink, progress: Callable | None = None) -> WorkerReport:
    """Run one worker's visits in order, handing each result to `sink`.  While a unit runs, the
    next unit's query bin, when it is another one, is prepared on a thread (at most two query
    bins are held at once), and the first one while the first reference bin is made; "query
    prepare" is the time the worker waited for one.  Units in `job.skip` are not run, and a
    visit left without units is neither built nor loaded.  `progress(key, share, hits)` hears
    of each unit's finished seed batches (key: (job, ordinal))."""
    engine = load_engine(job)
    codes = getattr(engine, "HOST_CODES", True)
    rep = WorkerReport(job.worker, job.device)
    order = []  # (visit, job, query bin) of every unit to run, in order
    for v, visit in enumerate(job.visits):
        for g in range(visit.first, visit.end):
            j, q = job.locate(g)
            if (j, job.ordinal(visit.ref_bin, j, q)) not in job.skip:
                order.append((v, j, q))
    visits = sorted({v for v, _, _ in order})
    with ThreadPoolExecutor(max_workers=1) as prep, ThreadPoolExecutor(max_workers=1) as load:
        queries = _Queries(job, qry_records, prep, codes)
        refs = _References(job, engine, ref_records, load, codes)
        if order:  # the first query bin is prepared while the first reference bin is made
            queries.ahead(order[0][1:])
        ref = None
        for i, (v, j, q) in enumerate(order):
            visit = job.visits[v]
            if i == 0 or order[i - 1][0] != v:  # one build or load per visit
                ref = None  # let the last bin go before the next one is made
                ref = refs.get(visit.ref_bin, rep)
                later = visits.index(v) + 1
                if later < len(visits):
                    refs.ahead(job.visits[visits[later]].ref_bin)
            with _naming_the_job(job, j):
                t = time.perf_counter()
                current, swapped = queries.get((j, q))
                _add(rep.phases, "query prepare", t)
                rep.query_swaps += swapped
                if i + 1 < len(order):
                    queries.ahead(order[i + 1][1:])
                _run_unit(job, engine, rep, ref, current, visit.ref_bin, j, sink, progress)
                release_free_memory()
    rep.finished_ms = _ms_since(job.t0)
    rep.peak_rss_kib = peak_rss_kib()
    return rep


@contextmanager
def _naming_the_job(job: WorkerJob, j: int) -> Iterator[None]:
    """In a batch, an error of one job's unit names the job and its query file."""
    try:
        yield
    except HspzError as exc:
        if job.queries is None:
            raise
        spec = job.queries[j]
        raise type(exc)(f"job {spec.job + 1:06d} ({spec.path}): {exc}") from exc


class _References:
    """The worker's reference bins, one visit at a time: built from the records, or loaded from
    an index (every piece verified as it is read).  A load of the next visit's bin runs ahead on
    `pool` while the current visit's units run (at most two bins are held then); a build does
    not, so a CPU run holds one bin's working set.  A load above LOAD_WARN_S seconds warns."""

    def __init__(self, job: WorkerJob, engine, records: Sequence[Record],
                 pool: ThreadPoolExecutor, host_codes: bool):
        self.job, self.engine, self.records, self.pool = job, engine, records, pool
        self.host_codes = host_codes
        self.index = None
        if job.index is not None:
            from hspz.formats.index import open_index

            self.index = open_index(job.index)
        self.next: tuple[int, Future] | None = None

    def _load(self, b: int):
        from hspz.engine.contract import load_reference

        loader = getattr(self.engine, "load_reference", load_reference)
        use_device = getattr(self.engine, "use_device", None)
        if use_device is not None:  # the current device is per thread
            use_device(self.job.device)
        t = time.perf_counter()
        ref = loader(self.job.ctx, self.index, b, self.job.threads)
        seconds = time.perf_counter() - t
        if seconds > LOAD_WARN_S:
            print(f"warning: loading reference bin {b} of the index {self.index.path} took "
                  f"{seconds:.1f} s; keep the index on local storage", file=sys.stderr)
        return ref, seconds

    def get(self, b: int, rep: WorkerReport):
        """Reference bin b, built or loaded, counted in `rep`."""
        t = time.perf_counter()
        if self.index is None:
            members = [self.records[k] for k in self.job.plan.ref_bins[b]]
            ref = prepare_reference(self.job.ctx, b, members, self.host_codes)
            _add(rep.phases, "reference build", t)
            rep.builds += 1
        else:
            if self.next is not None and self.next[0] == b:
                ref, seconds = self.next[1].result()
            else:
                ref, seconds = self._load(b)
            self.next = None
            _add(rep.phases, "reference load wait", t)
            rep.phases["reference load"] = rep.phases.get("reference load", 0.0) + seconds
            rep.loads += 1
        rep.uploads += 1
        return ref

    def ahead(self, b: int) -> None:
        """Start loading bin b (index loads only)."""
        if self.index is not None and self.next is None:
            self.next = (b, self.pool.submit(self._load, b))


LOAD_WARN_S = 10.0
PROGRESS_S = 0.5  # a worker process reports its unit's seed batches at most this often


def release_free_memory() -> None:
    """Hand the C heap's free pages back to the kernel (glibc `malloc_trim`; elsewhere
    nothing).  Each unit runs its batches on threads of its own, each thread's malloc arena
    keeps what its batches freed, and the next unit's threads may take other arenas: the
    simulated 24 x 4 Mbp pair at -B 8M -t 2 peaked at 857 MiB, 635 MiB with a trim after each
    unit (the estimate says 618)."""
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is not None:
        trim(0)


@functools.cache
def _libc():
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def peak_rss_kib() -> int:
    """This process's peak resident set size in KiB: VmHWM, the high-water mark of its own
    memory since it was exec'd.  (`ru_maxrss` also holds the RSS of the process it was
    started from: Linux records the old address space's mark at exec, so a worker spawned by
    a parent holding the inputs, or hspZ started from a large Python process, would report
    theirs.)"""
    try:
        for line in open("/proc/self/status", encoding="ascii"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class _Queries:
    """The worker's current query bin and the next one, prepared ahead on `prep`; keys are
    (job, query bin).  A batch job's records are read from its file when a bin of it is first
    needed and kept while the worker stays with that job (the last job's are let go)."""

    def __init__(self, job: WorkerJob, records: Sequence[Record], prep: ThreadPoolExecutor,
                 host_codes: bool):
        self.job, self.records, self.prep, self.host_codes = job, records, prep, host_codes
        self.current: tuple[tuple[int, int], QueryBin] | None = None
        self.next: tuple[tuple[int, int], Future] | None = None
        self.files: tuple[int, Sequence[Record]] | None = None  # (job, its records)
        self.lock = threading.Lock()

    def _records(self, j: int) -> Sequence[Record]:
        if self.job.queries is None:
            return self.records
        with self.lock:
            if self.files is None or self.files[0] != j:
                self.files = None
                self.files = (j, read_job_query(self.job.queries[j]))
            return self.files[1]

    def _prepare(self, key: tuple[int, int]) -> QueryBin:
        j, q = key
        bins = self.job.plan.query_bins if self.job.queries is None else \
            self.job.queries[j].query_bins
        records = self._records(j)
        return prepare_query(self.job.ctx, q, [records[i] for i in bins[q]], self.host_codes)

    def get(self, key: tuple[int, int]) -> tuple[QueryBin, bool]:
        """(query bin `key`, whether it replaced the current one)."""
        if self.current is not None and self.current[0] == key:
            return self.current[1], False
        self.current = None  # let it go before the next one is made
        if self.next is not None and self.next[0] == key:
            self.current = (key, self.next[1].result())
        else:
            self.current = (key, self._prepare(key))
        self.next = None
        return self.current[1], True

    def ahead(self, key: tuple[int, int]) -> None:
        """Prepare query bin `key` on the thread, unless it is the current or next one."""
        held = self.current is not None and self.current[0] == key
        if not held and (self.next is None or self.next[0] != key):
            self.next = (key, self.prep.submit(self._prepare, key))


def read_job_query(spec: QuerySpec) -> list[Record]:
    """A batch job's query records, read by the worker and checked against the records hash
    it was planned with (a file changed since planning fails the run, never the output)."""
    from hspz.io.packing import read_records, records_digest

    records = read_records(spec.path)
    if spec.digest != "-" and records_digest(records) != spec.digest:
        raise InputError("the file changed since the batch was planned (its records no longer "
                       "hash to the planned value)")
    return records


def _run_unit(job: WorkerJob, engine, rep: WorkerReport, ref, qry: QueryBin, ref_bin: int,
              j: int, sink: Sink, progress: Callable | None = None) -> None:
    from hspz.planning.estimate import unit_hit_histogram

    start = _ms_since(job.t0)
    ordinal = job.ordinal(ref_bin, j, qry.index)
    if progress is not None and job.progress:
        def batches(done: int, total: int, hits: int) -> None:
            progress((j, ordinal), done / max(total, 1), hits)

        result = engine.run_unit(job.ctx, ref, qry, ordinal, progress=batches)
    else:
        result = engine.run_unit(job.ctx, ref, qry, ordinal)
    result.host_start_ms, result.host_end_ms = start, _ms_since(job.t0)
    result.worker, result.device, result.job = job.worker, job.device, j
    rep.phases["engine"] = rep.phases.get("engine", 0.0) + result.gpu_ms / 1e3
    add_thread_phases(rep, result.phases)
    rep.busy_ms += result.gpu_ms
    rep.units += 1
    extras = None
    if job.hit_stats:
        t = time.perf_counter()
        extras = unit_hit_histogram(job.ctx, ref, qry)
        _add(rep.phases, "hit stats", t)
    sink(result, extras)


# --------------------------------------------------------------------------------------------
# Several workers: one process each
# --------------------------------------------------------------------------------------------


@dataclass
class SharedRecords:
    """Records whose bases live in a shared-memory block (names and offsets pickled)."""

    shm_name: str
    names: list[str]
    offsets: list[int]
    lengths: list[int]
    _shm: object = None

    def attach(self) -> SharedRecords:
        self._shm = shared_memory.SharedMemory(name=self.shm_name)
        return self

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, i: int) -> Record:
        buf = np.ndarray((self.lengths[i],), np.uint8, self._shm.buf, self.offsets[i])
        return Record(self.names[i], buf)

    def __getstate__(self):
        return dict(self.__dict__, _shm=None)


def share(sides: Sequence[Sequence[Record]]) -> tuple[shared_memory.SharedMemory,
                                                       list[SharedRecords]]:
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


def _fill(shm: shared_memory.SharedMemory, sides: Sequence[Sequence[Record]],
          total: int) -> list[SharedRecords]:
    block = np.ndarray((total,), np.uint8, shm.buf)
    out, copies, at = [], [], 0
    for side in sides:
        offsets = []
        for rec in side:
            copies.append((at, rec.seq))
            offsets.append(at)
            at += len(rec)
        out.append(SharedRecords(shm.name, [r.name for r in side], offsets,
                                 [len(r) for r in side]))
    try:
        with ThreadPoolExecutor(min(8, os.cpu_count() or 1)) as pool:  # copies release the GIL
            list(pool.map(_copy_into, [block] * len(copies), *zip(*copies, strict=True)))
    finally:
        del block  # the block must hold no exported view when it is closed
    return out


def _copy_into(block: np.ndarray, at: int, seq: np.ndarray) -> None:
    block[at:at + len(seq)] = seq


def _child(job: WorkerJob, ref: SharedRecords, qry: SharedRecords, out) -> None:
    """A worker process: run the job, stream results, then report (or report the failure)."""
    try:
        ref.attach()
        qry.attach()
        out.put(("attached", job.worker))

        def send(result: UnitResult, extras) -> None:
            out.put(("unit", job.worker, result.to_bytes(), extras))

        last = [0.0]

        def tell(key, share: float, hits: int) -> None:
            now = time.perf_counter()
            if now - last[0] >= PROGRESS_S:
                last[0] = now
                out.put(("progress", job.worker, key, share, hits))

        out.put(("done", job.worker, run_worker(job, ref, qry, send, tell)))
    except BaseException as exc:  # reported to the parent, which turns it into one line
        detail = traceback.format_exc() if os.environ.get("HSPZ_DEBUG") == "1" else ""
        message = str(exc) if isinstance(exc, HspzError) else f"{type(exc).__name__}: {exc}"
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

    def __init__(self, n: int, engine: str, numba: bool = False):
        import multiprocessing

        mp = multiprocessing.get_context("spawn")
        self.out = mp.Queue()
        pipes = [mp.Pipe(duplex=False) for _ in range(n)]  # (receiving, sending) ends
        self.inboxes = [send for _, send in pipes]
        self.procs = [mp.Process(target=_pooled, args=(engine, k, recv, self.out, numba,
                                                       os.getpid()),
                                 daemon=True) for k, (recv, _) in enumerate(pipes)]
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

    def __exit__(self, kind, *_) -> None:
        self.close(failed=kind is not None)

    def run(self, jobs: Sequence[WorkerJob], ref_records: Sequence[Record],
            qry_records: Sequence[Record], sink: Sink,
            progress: Callable | None = None) -> list[WorkerReport]:
        """Run jobs[k] on process k (k = its worker number); results go to `sink`.  Returns
        when every worker has reported; `close` waits for their exit."""
        self.shm, (ref, qry) = share([ref_records, qry_records])
        try:
            for k, job in enumerate(jobs):
                _hand(k, self.inboxes[k], (job, ref, qry))
            self.handed = len(jobs)
            self._stop(range(self.handed, self.started))
            return _collect(self.procs[:len(jobs)], self.out, sink, len(jobs), self.unlink,
                            progress)
        except BaseException:
            self.close(failed=True)
            raise

    def close(self, failed: bool = False) -> None:
        """Wait for the processes with a job to exit and stop the rest; after a failure, stop
        them all at once.  Then free the shared records, the pipes and the queue."""
        self._stop(range(self.started) if failed else range(self.handed, self.started))
        for p in self.procs[:self.started]:
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

    def _stop(self, which) -> None:
        """Terminate processes `which` (nothing to lose: a failed run, or no job)."""
        for k in which:
            if self.procs[k].is_alive():
                self.procs[k].terminate()


def _hand(worker: int, inbox, message) -> None:
    try:
        inbox.send(message)
    except OSError as exc:  # BrokenPipeError: the process is gone
        raise RunError(f"worker {worker} exited before its job was handed over "
                       f"({exc.strerror or exc})") from exc


def die_with_parent(parent: int) -> None:
    """Have the kernel SIGKILL this process when its parent dies (Linux PR_SET_PDEATHSIG;
    nothing a worker holds needs more cleanup than the kernel gives it), and exit now when the
    parent already died before the request (this process was reparented)."""
    if sys.platform.startswith("linux") and _libc() is not None:
        _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _pooled(engine: str, worker: int, inbox, out, numba: bool = False,
            parent: int | None = None) -> None:
    """A pooled worker process: die with `parent`; import the engine and start the device
    worker `worker` will most likely use (where the engine offers `warm_worker`), and load
    numba when asked (bins that large prepare with it), while the parent prepares the shared
    records; then run its job and exit as soon as its messages are in the pipe (the parent
    waits for the exit; finalising the interpreter and the CUDA context would add about
    0.3 s).  Without a job (the parent closed the pipe) it just exits."""
    if parent is not None:
        die_with_parent(parent)
    try:
        warm = getattr(importlib.import_module(engine), "warm_worker", None)
        if warm is not None:
            warm(worker)
        if numba:
            from hspz.core import jit

            jit.load()
    except Exception:  # no CuPy here, say: the job's own import reports it properly
        pass
    try:
        job = inbox.recv()
    except EOFError:
        os._exit(0)
    _child(*job, out)
    out.close()
    out.join_thread()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_workers(jobs: Sequence[WorkerJob], ref_records: Sequence[Record],
                qry_records: Sequence[Record], sink: Sink, pool: Pool | None = None,
                progress: Callable | None = None) -> list[WorkerReport]:
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

    def __call__(self, result: UnitResult, extras) -> None:
        self._raise_done()
        self.pending.append(self.thread.submit(self.sink, result, extras))

    def _raise_done(self) -> None:
        while self.pending and self.pending[0].done():
            self.pending.pop(0).result()

    def __enter__(self) -> _Handoff:
        return self

    def __exit__(self, kind, *_) -> None:
        try:
            if kind is None:
                for f in self.pending:
                    f.result()
        finally:
            for f in self.pending:
                f.cancel()
            self.thread.shutdown(wait=True)


def _collect(procs, out, sink: Sink, n: int,
             attached: Callable[[], None] = lambda: None,
             progress: Callable | None = None) -> list[WorkerReport]:
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


def _check_alive(procs, reports: dict, suspects: set[int]) -> set[int]:
    """Workers found dead twice in a row with nothing left on the queue died unreported."""
    dead = {k for k, p in enumerate(procs) if k not in reports and p.exitcode is not None}
    for k in sorted(dead & suspects):
        raise RunError(f"worker {k} died without reporting (exit code {procs[k].exitcode})")
    return dead
