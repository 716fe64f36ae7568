"""The worker loop: a worker runs its visits of the schedule on its device and hands every
UnitResult to the sink (completion order; the emitter restores plan order).

A worker builds each visited reference bin once and reuses it across the visit's query slice
(the next one is prefetched on a thread); the current query bin is kept until a unit needs
another one.  Its report carries the lifecycle counts (builds, uploads, query swaps), its busy
and finish times and its peak RSS.  Where workers run (this process, or one process each) is
`pool`'s.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from hspz.core.errors import HspzError, InputError
from hspz.engine.contract import Backend, Context, QueryBin, UnitResult
from hspz.io.records import Record
from hspz.planning.bins import Bins, Plan
from hspz.planning.schedule import Visit
from hspz.run.libc import peak_rss_kib, release_free_memory

if TYPE_CHECKING:
    from hspz.engine.contract import RefBin


class Records(Protocol):
    """What a worker reads records from: a list, or (in a worker process) `pool.SharedRecords`
    (the shared block; the pool sits beside the loop and imports it, so it is named here by
    what it offers)."""

    def __len__(self) -> int: ...

    def __getitem__(self, i: int, /) -> Record: ...


Sink = Callable[[UnitResult, Any], None]  # (result, hit histogram or None)


@dataclass(frozen=True)
class QuerySpec:
    """One job of a query-list run as a worker sees it: its query bins (record indices of its file)
    and the file, which the worker reads itself when it needs the job (the records are checked
    against the hash they were planned with)."""

    job: int  # index of the job in the query-list run
    query_bins: Bins
    path: str
    digest: str


@dataclass
class WorkerJob:
    """Everything one worker needs besides the records (picklable).

    A single query's worker has `queries` None: its visits cover that query's bins, whose
    records are handed to it.  A query-list worker's visits cover the jobs' axis (`joblist.JobAxis`:
    every job's query bins in job order) and it reads each job's query file when a visit
    reaches the job.  `skip` holds (job, ordinal) of units already done (a resumed `work`)."""

    worker: int
    device: int
    visits: list[Visit]
    ctx: Context
    plan: Plan
    engine: Backend  # `engine.cpu.BACKEND` or `engine.gpu.BACKEND` (pickled by its class)
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
        from hspz.planning.joblist import JobAxis

        return JobAxis(tuple(len(s.query_bins) for s in self.queries)).locate(g)

    def ordinal(self, r: int, job: int, q: int) -> int:
        """The job's own ordinal of unit (reference bin r, its query bin q)."""
        n = len(self.plan.query_bins) if self.queries is None else len(self.queries[job].query_bins)
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


def load_engine(job: WorkerJob) -> Backend:
    """The job's backend, bound to its device and told its threads."""
    engine = job.engine
    engine.use_device(job.device)
    engine.set_threads(job.threads)
    return engine


def _ms_since(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


def _add(phases: dict, name: str, t: float) -> None:
    phases[name] = phases.get(name, 0.0) + (time.perf_counter() - t)


def run_worker(
    job: WorkerJob,
    ref_records: Records,
    qry_records: Records,
    sink: Sink,
    progress: Callable | None = None,
) -> WorkerReport:
    """Run one worker's visits in order, handing each result to `sink`.  While a unit runs, the
    next unit's query bin, when it is another one, is prepared on a thread (at most two query
    bins are held at once), and the first one while the first reference bin is made; "query
    prepare" is the time the worker waited for one.  Units in `job.skip` are not run, and a
    visit left without units is neither built nor loaded.  `progress(key, share, hits)` hears
    of each unit's finished seed batches (key: (job, ordinal))."""
    engine = load_engine(job)
    rep = WorkerReport(job.worker, job.device)
    order = []  # (visit, job, query bin) of every unit to run, in order
    for v, visit in enumerate(job.visits):
        for g in range(visit.first, visit.end):
            j, q = job.locate(g)
            if (j, job.ordinal(visit.ref_bin, j, q)) not in job.skip:
                order.append((v, j, q))
    visits = sorted({v for v, _, _ in order})
    with ThreadPoolExecutor(max_workers=1) as prep, ThreadPoolExecutor(max_workers=1) as load:
        queries = _Queries(job, engine, qry_records, prep)
        refs = _References(job, engine, ref_records, load)
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
    """In a query-list run, an error of one job's unit names the job and its query file."""
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

    def __init__(
        self, job: WorkerJob, engine: Backend, records: Records, pool: ThreadPoolExecutor
    ) -> None:
        self.job, self.engine, self.records, self.pool = job, engine, records, pool
        self.index = None
        if job.index is not None:
            from hspz.formats.index import open_index

            self.index = open_index(job.index)
        self.next: tuple[int, Future] | None = None

    def _load(self, b: int) -> tuple[Any, float]:
        assert self.index is not None  # bins are loaded only from an index
        self.engine.use_device(self.job.device)  # the current device is per thread
        t = time.perf_counter()
        ref = self.engine.load_reference(self.job.ctx, self.index, b, self.job.threads)
        seconds = time.perf_counter() - t
        if seconds > LOAD_WARN_S:
            print(
                f"warning: loading reference bin {b} of the index {self.index.path} took "
                f"{seconds:.1f} s; keep the index on local storage",
                file=sys.stderr,
            )
        return ref, seconds

    def get(self, b: int, rep: WorkerReport) -> RefBin | Any:
        """Reference bin b, built or loaded, counted in `rep`."""
        t = time.perf_counter()
        if self.index is None:
            members = [self.records[k] for k in self.job.plan.ref_bins[b]]
            ref = self.engine.prepare_reference(self.job.ctx, b, members)
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


class _Queries:
    """The worker's current query bin and the next one, prepared ahead on `prep`; keys are
    (job, query bin).  A query-list job's records are read from its file when a bin of it is first
    needed and kept while the worker stays with that job (the last job's are let go)."""

    def __init__(self, job: WorkerJob, engine: Backend, records: Records, prep: ThreadPoolExecutor):
        self.job, self.engine, self.records, self.prep = job, engine, records, prep
        self.current: tuple[tuple[int, int], QueryBin] | None = None
        self.next: tuple[tuple[int, int], Future] | None = None
        self.files: tuple[int, Sequence[Record]] | None = None  # (job, its records)
        self.lock = threading.Lock()

    def _records(self, j: int) -> Records:
        if self.job.queries is None:
            return self.records
        with self.lock:
            if self.files is None or self.files[0] != j:
                self.files = None
                self.files = (j, read_job_query(self.job.queries[j]))
            return self.files[1]

    def _prepare(self, key: tuple[int, int]) -> QueryBin:
        j, q = key
        bins = (
            self.job.plan.query_bins if self.job.queries is None else self.job.queries[j].query_bins
        )
        records = self._records(j)
        return self.engine.prepare_query(self.job.ctx, q, [records[i] for i in bins[q]])

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
    """A query-list job's query records, read by the worker and checked against the records hash
    it was planned with (a file changed since planning fails the run, never the output)."""
    from hspz.io.digests import records_digest
    from hspz.io.readers import read_records

    records = read_records(spec.path)
    if spec.digest != "-" and records_digest(records) != spec.digest:
        raise InputError(
            "the file changed since the batch was planned (its records no longer "
            "hash to the planned value)"
        )
    return records


def _run_unit(
    job: WorkerJob,
    engine: Backend,
    rep: WorkerReport,
    ref: RefBin | Any,
    qry: QueryBin,
    ref_bin: int,
    j: int,
    sink: Sink,
    progress: Callable | None = None,
) -> None:
    from hspz.planning.estimate import unit_hit_histogram

    start = _ms_since(job.t0)
    ordinal = job.ordinal(ref_bin, j, qry.index)
    if progress is not None and job.progress:

        def seed_batch_progress(done: int, total: int, hits: int) -> None:
            progress((j, ordinal), done / max(total, 1), hits)

        result = engine.run_unit(job.ctx, ref, qry, ordinal, progress=seed_batch_progress)
    else:
        result = engine.run_unit(job.ctx, ref, qry, ordinal)
    result.host_start_ms, result.host_end_ms = start, _ms_since(job.t0)
    result.worker, result.device, result.job = job.worker, job.device, j
    rep.phases["engine"] = rep.phases.get("engine", 0.0) + result.engine_ms / 1e3
    add_thread_phases(rep, result.phases)
    rep.busy_ms += result.engine_ms
    rep.units += 1
    extras = None
    if job.hit_stats:
        t = time.perf_counter()
        extras = unit_hit_histogram(job.ctx, ref, qry)
        _add(rep.phases, "hit stats", t)
    sink(result, extras)
