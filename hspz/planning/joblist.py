"""Query-list mode: many queries against one reference (`run --query-list`, and
`plan`/`work`/`merge` over a list): the list file, the query-list run's query axis and
`queries.tsv`.

A job is one listed query.  Every job keeps its own frozen plan (query bins, cap, seed batches,
dedup scopes, -D history), so its output is the bytes of a standalone run of that query; what
the jobs share is the reference bins, which must be identical.  The query-list run schedule treats
the jobs' query bins as one axis (job 1's bins, then job 2's, ...) of the R x Q grid a single query
has, so `schedule`'s count partition and LPT spread a query-list run over the workers unchanged, and
a visit R3[0..7) may cover the last bins of one job and the first of the next: query-list run unit g
of reference bin r is job j's unit r * Q_j + q, where (j, q) = axis.locate(g).
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hspz.core.durable import os_path
from hspz.core.errors import InputError, UsageError
from hspz.planning.bins import Bins, Plan

QUERIES_TSV = "queries.tsv"
NAMES_TSV = "names.tsv"
QUERIES_COLUMNS = (
    "job",
    "path",
    "bytes",
    "sha256",
    "blocks",
    "units",
    "hsps",
    "digest",
    "completion",
)


def job_name(number: int) -> str:
    """Job 1 -> '000001': its folder (or archive) under OUT and its dump-file suffix."""
    return f"{number:06d}"


@dataclass(frozen=True)
class ListedQuery:
    number: int  # 1-based, in list order
    path: str  # as resolved against the list's folder
    line: int  # line of the list file


def read_query_list(path: str | os.PathLike) -> tuple[list[ListedQuery], list[str]]:
    """The queries of a list file (one path a line; blank lines and `#` comments ignored;
    relative paths opened as the OS opens them from the list's folder: `durable.os_path`, no
    textual `..` folding across a symbolic link) and the notes to print (a file listed twice is
    allowed, and said)."""
    source = os.fspath(path)
    if source in _lists_read:  # one read per command: a pipe is read once, and the paths
        return _lists_read[source]  # checked against the outputs are the paths run
    _lists_read[source] = read = _read_query_list(path, source)
    return read


_lists_read: dict[str, tuple[list[ListedQuery], list[str]]] = {}


def forget_lists() -> None:
    """A new command starts (`cli.main`): lists are read again."""
    _lists_read.clear()


def _read_query_list(path: str | os.PathLike, source: str) -> tuple[list[ListedQuery], list[str]]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(
            f"--query-list: cannot read {source}: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    folder = Path(path).absolute().parent
    jobs: list[ListedQuery] = []
    for n, raw in enumerate(text.splitlines(), 1):
        entry = raw.strip()
        if not entry or entry.startswith("#"):
            continue
        if any(ord(c) < 32 for c in entry):
            raise InputError(f"--query-list: {source} line {n}: a path with a control character")
        jobs.append(ListedQuery(len(jobs) + 1, os_path(entry, folder), n))
    if not jobs:
        raise UsageError(f"--query-list: {source} lists no queries (only blank lines and comments)")
    return jobs, duplicate_notes(jobs)


def duplicate_notes(jobs: Sequence[ListedQuery]) -> list[str]:
    """One note per job whose file an earlier job lists too (the same path or the same file)."""
    notes: list[str] = []
    seen: dict[tuple[int, int] | str, int] = {}
    for job in jobs:
        try:
            st = os.stat(job.path)
            key: tuple[int, int] | str = (st.st_dev, st.st_ino)
        except OSError:  # reported when the query is read
            key = job.path
        if key in seen:
            notes.append(
                f"note: job {job_name(job.number)} lists the same file as job "
                f"{job_name(seen[key])} ({job.path}); it runs again as its own job"
            )
        else:
            seen[key] = job.number
    return notes


@dataclass(frozen=True)
class JobAxis:
    """The jobs' query bins as one axis: job j owns [offsets[j], offsets[j] + counts[j])."""

    counts: tuple[int, ...]  # query bins per job, in job order

    @property
    def offsets(self) -> tuple[int, ...]:
        out, at = [], 0
        for c in self.counts:
            out.append(at)
            at += c
        return tuple(out)

    @property
    def total(self) -> int:
        return sum(self.counts)

    def locate(self, g: int) -> tuple[int, int]:
        """(job index, its query bin) of axis position g."""
        offsets = self.offsets
        j = bisect_right(offsets, g) - 1
        return j, g - offsets[j]

    def plan(self, ref_bins: Bins) -> Plan:
        """The query-list run as one grid for `schedule.make_schedule`: the shared reference bins by
        every job's query bins (only their count matters to the schedule)."""
        return Plan(tuple(ref_bins), tuple((g,) for g in range(self.total)))

    def job_ordinal(self, r: int, g: int) -> tuple[int, int]:
        """(job index, the job's own unit ordinal r * Q_j + q) of query-list run unit (r, g)."""
        j, q = self.locate(g)
        return j, r * self.counts[j] + q


def check_same_reference_bins(bins: Sequence[Bins], paths: Sequence[str]) -> None:
    """Every job must plan to the first job's reference bins."""
    for k, (b, path) in enumerate(zip(bins, paths, strict=True)):
        if tuple(b) != tuple(bins[0]):
            raise UsageError(
                f"--query-list: job {job_name(k + 1)} ({path}) plans "
                f"{len(b)} reference bin(s) where job {job_name(1)} plans "
                f"{len(bins[0])}; every job of a batch must share the reference "
                f"bins (give -B and --query-block-size explicitly)"
            )


def queries_tsv(rows: Sequence[dict]) -> str:
    """`queries.tsv`: one row per job, QUERIES_COLUMNS."""
    lines = ["\t".join(QUERIES_COLUMNS)]
    lines += ["\t".join(str(row[c]) for c in QUERIES_COLUMNS) for row in rows]
    return "".join(f"{line}\n" for line in lines)
