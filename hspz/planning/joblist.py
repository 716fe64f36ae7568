"""Batch mode: many queries against one reference (`run --query-list`, and `plan`/`work`/`merge`
over a list): the list file, the batch's query axis and `queries.tsv`.

A job is one listed query.  Every job keeps its own frozen plan (query bins, cap, seed batches,
dedup scopes, -D history), so its output is the bytes of a standalone run of that query; what
the jobs share is the reference bins, which must be identical.  The batch schedule treats the
jobs' query bins as one axis (job 1's bins, then job 2's, ...) of the R x Q grid a single query
has, so `schedule`'s count partition and LPT spread a batch over the workers unchanged, and a
visit R3[0..7) may cover the last bins of one job and the first of the next: batch unit g of
reference bin r is job j's unit r * Q_j + q, where (j, q) = axis.locate(g).
"""

from __future__ import annotations

import json
import os
import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hspz.core import faults
from hspz.core.durable import os_path
from hspz.core.errors import InputError, UsageError, sigterm_held
from hspz.planning.memory import Bins, Plan
from hspz.run import outdir

QUERIES_TSV = "queries.tsv"
NAMES_TSV = "names.tsv"
QUERIES_COLUMNS = ("job", "path", "bytes", "sha256", "blocks", "units", "hsps", "digest",
                   "completion")


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


def _read_query_list(path: str | os.PathLike, source: str) -> tuple[list[ListedQuery],
                                                                    list[str]]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"--query-list: cannot read {source}: "
                         f"{getattr(exc, 'strerror', None) or exc}") from None
    folder = Path(path).absolute().parent
    jobs: list[ListedQuery] = []
    for n, raw in enumerate(text.splitlines(), 1):
        entry = raw.strip()
        if not entry or entry.startswith("#"):
            continue
        if any(ord(c) < 32 for c in entry):
            raise InputError(f"--query-list: {source} line {n}: a path with a control "
                             f"character")
        jobs.append(ListedQuery(len(jobs) + 1, os_path(entry, folder), n))
    if not jobs:
        raise UsageError(f"--query-list: {source} lists no queries (only blank lines and "
                         f"comments)")
    return jobs, duplicate_notes(jobs)


def duplicate_notes(jobs: Sequence[ListedQuery]) -> list[str]:
    """One note per job whose file an earlier job lists too (the same path or the same file)."""
    notes, seen = [], {}
    for job in jobs:
        try:
            st = os.stat(job.path)
            key = (st.st_dev, st.st_ino)
        except OSError:  # reported when the query is read
            key = job.path
        if key in seen:
            notes.append(f"note: job {job_name(job.number)} lists the same file as job "
                         f"{job_name(seen[key])} ({job.path}); it runs again as its own job")
        else:
            seen[key] = job.number
    return notes


@dataclass(frozen=True)
class BatchAxis:
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
        """The batch as one grid for `schedule.make_schedule`: the shared reference bins by
        every job's query bins (only their count matters to the schedule)."""
        return Plan(tuple(ref_bins), tuple((g,) for g in range(self.total)))

    def job_ordinal(self, r: int, g: int) -> tuple[int, int]:
        """(job index, the job's own unit ordinal r * Q_j + q) of batch unit (r, g)."""
        j, q = self.locate(g)
        return j, r * self.counts[j] + q


def check_same_reference_bins(bins: Sequence[Bins], paths: Sequence[str]) -> None:
    """Every job must plan to the first job's reference bins."""
    for k, (b, path) in enumerate(zip(bins, paths, strict=True)):
        if tuple(b) != tuple(bins[0]):
            raise UsageError(f"--query-list: job {job_name(k + 1)} ({path}) plans "
                             f"{len(b)} reference bin(s) where job {job_name(1)} plans "
                             f"{len(bins[0])}; every job of a batch must share the reference "
                             f"bins (give -B and --query-block-size explicitly)")


def queries_tsv(rows: Sequence[dict]) -> str:
    """`queries.tsv`: one row per job, QUERIES_COLUMNS."""
    lines = ["\t".join(QUERIES_COLUMNS)]
    lines += ["\t".join(str(row[c]) for c in QUERIES_COLUMNS) for row in rows]
    return "".join(f"{line}\n" for line in lines)


# --------------------------------------------------------------------------------------------
# The batch contract on OUT (docs/guarantees.md, "One consistent OUT per batch")
# --------------------------------------------------------------------------------------------

JOB_ENTRY = re.compile(r"(\d{6})(\.tar\.gz)?")  # a job's folder, or its -Z archive


def job_entries(out: Path) -> set[str]:
    """The names in OUT that are a job's folder or archive."""
    return {e.name for e in os.scandir(out) if JOB_ENTRY.fullmatch(e.name)}


def _listed(out: Path) -> set[str]:
    """The job entries (either form) that OUT's queries.tsv lists, or none."""
    try:
        lines = (out / QUERIES_TSV).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return set()
    jobs = [line.split("\t", 1)[0] for line in lines[1:]]
    return {f"{j}{form}" for j in jobs if re.fullmatch(r"\d{6}", j) for form in ("", ".tar.gz")}


def _retired(out: Path) -> set[str]:
    """The job entries a batch under way (or killed) recorded as hspZ's."""
    try:
        record = json.loads((out / outdir.RETIRED).read_text(encoding="utf-8"))
        entries = record["entries"] if record.get("hspz") == "batch" else []
    except (OSError, ValueError, KeyError, AttributeError, TypeError):
        return set()
    return {e for e in entries if isinstance(e, str) and JOB_ENTRY.fullmatch(e)}


def known_entries(out: Path) -> set[str]:
    """The job entries in OUT that an hspZ batch wrote: queries.tsv's, and a batch under
    way's."""
    return _listed(out) | _retired(out)


ARCHIVE_HEAD = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # `emit.write_tarball`'s gzip header


def made_by_a_batch(path: Path) -> bool:
    """A job entry no queries.tsv lists (a workflow deletes a rule's queries.tsv before it
    reruns it) that is still recognisably hspZ's: a folder (not a link) holding nothing but
    segments files named as hspZ names them (and a killed publish's journal or marked stage),
    or an archive (not a link) with the gzip header `emit.write_tarball` writes."""
    try:
        if path.is_symlink():
            return False
        if path.is_dir():
            return not foreign_in_job_folder(path)
        if not path.is_file():  # a FIFO is never opened
            return False
        with open(path, "rb") as fh:
            return fh.read(len(ARCHIVE_HEAD)) == ARCHIVE_HEAD
    except OSError:
        return False


def foreign_in_job_folder(path: Path) -> list[str]:
    """The entries of job folder `path` that no hspZ batch writes there (anything but its
    segments files, a killed publish's journal and a marked stage folder)."""
    from hspz.core import durable

    return sorted(e.name for e in os.scandir(path)
                  if not ((outdir.OUR_NAMES.fullmatch(e.name) and e.is_file(follow_symlinks=False))
                          or (e.name == outdir.JOURNAL and e.is_file(follow_symlinks=False))
                          or (e.name.startswith(outdir.STAGE_PREFIX)
                              and durable.is_marked(e.path))))


def check_entries(out: Path, flag: str = "--output") -> None:
    """Refuse (before any work) an OUT holding a job folder or archive no hspZ batch wrote:
    the batch could neither list it nor remove it."""
    out = Path(os.path.abspath(out))
    foreign = sorted(n for n in job_entries(out) - known_entries(out)
                     if not made_by_a_batch(out / n))
    if foreign:
        raise UsageError(f"{flag}: {out / foreign[0]} is named like a batch job's output but no "
                         f"hspZ batch wrote it (queries.tsv does not list it); it is never "
                         f"replaced or removed: move it away, or name another OUT")
    for name in sorted(job_entries(out)) + [QUERIES_TSV, outdir.RETIRED]:
        p = out / name
        kind = "a symbolic link" if p.is_symlink() else None
        if kind is None and p.exists():
            wanted = p.is_dir() if JOB_ENTRY.fullmatch(name) and not name.endswith(".gz") \
                else p.is_file()
            kind = None if wanted else "not what hspZ writes there"
        if kind:
            raise UsageError(f"{flag}: {p} is {kind}; a batch writes its own job folders, "
                             f"archives and queries.tsv there and never follows or replaces "
                             f"another: move it away")


def retire(out: Path, entries: Sequence[str]) -> None:
    """The first step of a batch into OUT (under its lock, before any job publishes): one
    journalled publish that records every job entry hspZ wrote or will write here (OUT/
    .hspz-retired) and removes the older batch's queries.tsv, so OUT is visibly incomplete
    until the new queries.tsv is written."""
    out = Path(os.path.abspath(out))
    from hspz.core import durable

    for name in sorted(job_entries(out) - set(entries)):  # the folders sweep_stale removes
        p = out / name
        if p.is_dir() and not p.is_symlink() and (odd := foreign_in_job_folder(p)):
            raise UsageError(f"--output: {p / odd[0]} is not a file an hspZ batch writes in a "
                             f"job's folder, and this batch removes {name}/, never a file it "
                             f"did not make: move it away")
    ours = known_entries(out) | {n for n in job_entries(out) if made_by_a_batch(out / n)}
    record = dict(hspz="batch", entries=sorted(ours | set(entries)))
    stage = outdir.new_stage(out)
    durable.ensure_marked(stage)
    staged = stage / outdir.RETIRED
    durable.write_new(staged, (json.dumps(record) + "\n").encode())
    old = [out / QUERIES_TSV] if (out / QUERIES_TSV).exists() else []
    with sigterm_held():
        outdir.publish(out, stage, [(staged, out / outdir.RETIRED)], old)
    faults.point("batch-retired")


def sweep_stale(out: Path, entries: Sequence[str]) -> None:
    """Before the new queries.tsv: remove (journalled) every job entry an hspZ batch wrote in
    OUT that this batch does not list: an older batch's other jobs and the other form."""
    out = Path(os.path.abspath(out))
    from hspz.core import durable

    stale = sorted((job_entries(out) & known_entries(out)) - set(entries))
    if stale:
        folders = [out / n for n in stale if (out / n).is_dir() and not (out / n).is_symlink()]
        files = [out / n for n in stale if out / n not in folders]
        stage = outdir.new_stage(out)
        durable.ensure_marked(stage)
        with sigterm_held():
            outdir.publish(out, stage, [], files, folders=folders)
    faults.point("batch-swept")


def complete_batch(out: Path, text: str) -> None:
    """The last step: queries.tsv written (atomically), then the record of the batch under way
    removed."""
    from hspz.core import durable

    with sigterm_held():
        durable.write_text(out / QUERIES_TSV, text, "--output")
        (out / outdir.RETIRED).unlink(missing_ok=True)
        durable.fsync_dir(out)
