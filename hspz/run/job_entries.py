"""A query-list run's entries in OUT: the job folders (or -Z archives) a query-list run wrote, the
retired list while a query-list run is under way, the check that OUT holds nothing foreign, and
sweeping, retiring and completing them through outdir's journal."""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path

from hspz.core import faults
from hspz.core.errors import UsageError, sigterm_held
from hspz.planning.joblist import QUERIES_TSV
from hspz.run import outdir

JOB_ENTRY = re.compile(r"(\d{6})(\.tar\.gz)?")  # a job's folder, or its -Z archive


def job_entries(out: Path) -> set[str]:
    """The names in OUT that are a job's folder or archive."""
    return {e.name for e in os.scandir(out) if JOB_ENTRY.fullmatch(e.name)}


def _read_plain(path: Path) -> str:
    """The text of `path` when it is a regular file; OSError otherwise.  No link is followed and
    a FIFO is never waited on (O_NONBLOCK): a user's FIFO or link to one (or to /dev/zero) under
    a reserved name is refused by `check_entries`, not read."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        return fh.read().decode("utf-8")


def _listed(out: Path) -> set[str]:
    """The job entries (either form) that OUT's queries.tsv lists, or none."""
    try:
        lines = _read_plain(out / QUERIES_TSV).splitlines()
    except (OSError, UnicodeDecodeError):
        return set()
    jobs = [line.split("\t", 1)[0] for line in lines[1:]]
    return {f"{j}{form}" for j in jobs if re.fullmatch(r"\d{6}", j) for form in ("", ".tar.gz")}


def _record(out: Path) -> list[str] | None:
    """The entries of OUT/.hspz-retired when it is a record a query-list run wrote (`retire`: a
    list of job entry names, nothing else), else None."""
    try:
        record = json.loads(_read_plain(out / outdir.RETIRED))
        entries = record["entries"] if record.get("hspz") == "batch" else None
    except (OSError, ValueError, KeyError, AttributeError, TypeError):
        return None
    if not isinstance(entries, list):
        return None
    ours = all(isinstance(e, str) and JOB_ENTRY.fullmatch(e) for e in entries)
    return entries if ours else None


def _retired(out: Path) -> set[str]:
    """The job entries a query-list run under way (or killed) recorded as hspZ's."""
    return set(_record(out) or [])


def known_entries(out: Path) -> set[str]:
    """The job entries in OUT that an hspZ query-list run wrote: queries.tsv's, and a query-list run
    under way's."""
    return _listed(out) | _retired(out)


ARCHIVE_HEAD = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # `emit.write_tarball`'s gzip header


def made_by_a_query_list(path: Path) -> bool:
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
    """The entries of job folder `path` that no hspZ query-list run writes there (anything but its
    segments files, a killed publish's journal and a marked stage folder)."""
    from hspz.core import durable

    return sorted(
        e.name
        for e in os.scandir(path)
        if not (
            (outdir.OUR_NAMES.fullmatch(e.name) and e.is_file(follow_symlinks=False))
            or (e.name == outdir.JOURNAL and e.is_file(follow_symlinks=False))
            or (e.name.startswith(outdir.STAGE_PREFIX) and durable.is_marked(e.path))
        )
    )


def check_entries(out: Path, flag: str = "--output") -> None:
    """Refuse (before any work) an OUT holding a job folder or archive no hspZ query-list run wrote:
    the query-list run could neither list it nor remove it."""
    out = Path(os.path.abspath(out))
    foreign = sorted(
        n for n in job_entries(out) - known_entries(out) if not made_by_a_query_list(out / n)
    )
    if foreign:
        raise UsageError(
            f"{flag}: {out / foreign[0]} is named like a batch job's output but no "
            f"hspZ batch wrote it (queries.tsv does not list it); it is never "
            f"replaced or removed: move it away, or name another OUT"
        )
    for name in sorted(job_entries(out)) + [QUERIES_TSV, outdir.RETIRED]:
        p = out / name
        kind = "a symbolic link" if p.is_symlink() else None
        if kind is None and p.exists():
            wanted = (
                p.is_dir()
                if JOB_ENTRY.fullmatch(name) and not name.endswith(".gz")
                else p.is_file()
            )
            kind = None if wanted else "not what hspZ writes there"
        if kind:
            raise UsageError(
                f"{flag}: {p} is {kind}; a batch writes its own job folders, "
                f"archives and queries.tsv there and never follows or replaces "
                f"another: move it away"
            )
    if (out / outdir.RETIRED).is_file() and _record(out) is None:
        raise UsageError(
            f"{flag}: {out / outdir.RETIRED} is not the record a batch keeps there while it "
            f"runs, and a batch never replaces a file it did not write: move it away"
        )


def retire(out: Path, entries: Sequence[str]) -> None:
    """The first step of a query-list run into OUT (under its lock, before any job publishes): one
    journalled publish that records every job entry hspZ wrote or will write here (OUT/
    .hspz-retired) and removes the older query-list run's queries.tsv, so OUT is visibly incomplete
    until the new queries.tsv is written."""
    out = Path(os.path.abspath(out))
    from hspz.core import durable

    for name in sorted(job_entries(out) - set(entries)):  # the folders sweep_stale removes
        p = out / name
        if p.is_dir() and not p.is_symlink() and (odd := foreign_in_job_folder(p)):
            raise UsageError(
                f"--output: {p / odd[0]} is not a file an hspZ batch writes in a "
                f"job's folder, and this batch removes {name}/, never a file it "
                f"did not make: move it away"
            )
    ours = known_entries(out) | {n for n in job_entries(out) if made_by_a_query_list(out / n)}
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
    """Before the new queries.tsv: remove (journalled) every job entry an hspZ query-list run wrote
    in OUT that this query-list run does not list: an older query-list run's other jobs and the
    other form."""
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


def complete_query_list(out: Path, text: str) -> None:
    """The last step: queries.tsv written (atomically), then the record of the query-list run under
    way removed."""
    from hspz.core import durable

    with sigterm_held():
        durable.write_text(out / QUERIES_TSV, text, "--output")
        (out / outdir.RETIRED).unlink(missing_ok=True)
        durable.fsync_dir(out)
