"""The plan file of `hspZ plan`: the workflow's frozen work.

A plan file is text, sealed by one checksum line (`sealed.sealed`): the mode (`single`: one
query, its output in OUT; `batch`: a query list, OUT/000001/, ...), the reference's path and
the index's, the schedule for W workers (over the query-list run's axis of every job's query bins,
`joblist.JobAxis`), and per job its query file (size and sha256 when planned) and its frozen
plan, the lines of the manifest `--dump-manifest` writes for it.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from hspz.core.errors import InputError, UsageError
from hspz.formats.manifest import Manifest, manifest_body, manifest_lines
from hspz.formats.sealed import Lines, check_format, int_at, read_bytes, sealed, unsealed
from hspz.planning.bins import Plan
from hspz.planning.joblist import JobAxis, job_name
from hspz.planning.schedule import Schedule, Visit, schedule_lines

PLAN_FORMAT = 3  # 3: query lists (jobs, an index path)


@dataclass
class PlanJob:
    """One job of a plan file: its number (1, 2, ...), query file and frozen plan."""

    number: int
    path: str
    size: int | None
    sha256: str
    manifest: Manifest

    @property
    def name(self) -> str:
        return job_name(self.number)


@dataclass
class PlanFile:
    schedule: Schedule
    reference: str | None
    index: str | None
    jobs: list[PlanJob]
    query_list: bool
    digest: str = ""  # sha256 of the file's bytes

    @property
    def manifest(self) -> Manifest:
        return self.jobs[0].manifest

    @property
    def query(self) -> str:
        return self.jobs[0].path

    @property
    def axis(self) -> JobAxis:
        return JobAxis(tuple(len(j.manifest.plan.query_bins) for j in self.jobs))

    def grid(self) -> Plan:
        """The plan the schedule covers: the reference bins by every job's query bins."""
        return self.axis.plan(self.manifest.plan.ref_bins)

    def worker_units(self, k: int) -> list[tuple[int, int]]:
        """(job index, ordinal) of every unit worker k runs."""
        axis = self.axis
        return [
            axis.job_ordinal(v.ref_bin, g)
            for v in self.schedule.visits[k]
            for g in range(v.first, v.end)
        ]


def plan_text(pf: PlanFile) -> str:
    """The sealed text of a plan file."""
    for p in [pf.reference or "-", pf.index or "-", *(j.path for j in pf.jobs)]:
        if "\n" in p:
            raise UsageError(f"an input path holds a newline: {p!r}")
        if not _utf8(p):  # a name's bytes that are not UTF-8 (surrogate escapes)
            raise UsageError(f"an input path is not UTF-8 text: {p!r}")
    s = pf.schedule
    lines = [
        f"hspz-plan {PLAN_FORMAT}",
        f"mode {'batch' if pf.query_list else 'single'}",
        f"reference_path {pf.reference or '-'}",
        f"index_path {pf.index or '-'}",
        f"workers {s.workers}",
        f"policy {s.policy}",
        f"reason {s.reason}",
    ]
    for k, visits in enumerate(s.visits):
        lines.append(f"worker {k} {s.devices[k]} {s.labels[k]}")
        lines += [f"visit {k} {v.ref_bin} {v.first} {v.end}" for v in visits]
    lines += schedule_lines(s)  # the lines `hspZ plan` prints, for readers
    lines.append(f"jobs {len(pf.jobs)}")
    for j in pf.jobs:
        size = "-" if j.size is None else str(j.size)
        lines.append(f"job {j.number} {size} {j.sha256} {j.path}")
    for j in pf.jobs:
        lines += [
            f"job-manifest {j.number}",
            *manifest_lines(j.manifest),
            f"end-manifest {j.number}",
        ]
    return sealed("".join(f"{line}\n" for line in lines))


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_plan(path: str | os.PathLike) -> PlanFile:
    """A plan file, its checksum, schedule and every job's manifest checked; InputError names
    the file."""
    return read_plan_bytes(read_bytes(path), os.fspath(path))


def read_plan_bytes(data: bytes, source: str) -> PlanFile:
    check_format(data, source, "hspz-plan", PLAN_FORMAT, "plan file")
    head, sections = _sections(unsealed(data, source, "plan file"), source)
    lines = Lines(head, source)
    s = lines.scalars(
        ["hspz-plan", "mode", "reference_path", "index_path", "workers", "policy", "reason", "jobs"]
    )
    jobs = _jobs(lines, sections, int_at(lines, s["jobs"], "jobs"), source)
    mode = s["mode"][1]
    if mode not in ("single", "batch") or (mode == "single" and len(jobs) != 1):
        raise lines.error(s["mode"][0], f"bad mode {mode!r}")
    pf = PlanFile(
        Schedule("", "", [], []),
        _path(s["reference_path"][1]),
        _path(s["index_path"][1]),
        jobs,
        mode == "batch",
        hashlib.sha256(data).hexdigest(),
    )
    if any(j.manifest.plan.ref_bins != jobs[0].manifest.plan.ref_bins for j in jobs):
        raise InputError(f"{source}: the jobs do not share the reference bins")
    pf.schedule = _schedule(lines, int_at(lines, s["workers"], "workers"), s, pf.grid())
    return pf


def _path(text: str) -> str | None:
    return None if text == "-" else text


def _sections(text: str, source: str) -> tuple[str, dict[int, str]]:
    """The plan file's own lines, and each job's manifest lines by job number."""
    head: list[str] = []
    sections: dict[int, str] = {}
    current: str | None = None
    body: list[str] = []
    for raw in text.split("\n"):
        key, _, rest = raw.partition(" ")
        if key == "job-manifest" and current is None:
            current, body = rest, []
        elif key == "end-manifest" and current is not None:
            if rest != current or not current.isdigit() or int(current) in sections:
                raise InputError(f"{source}: malformed job section {current!r}")
            sections[int(current)] = "\n".join(body) + "\n"
            current = None
        elif current is not None:
            body.append(raw)
        else:
            head.append(raw)
    if current is not None:
        raise InputError(f"{source}: job section {current} has no end")
    return "\n".join(head), sections


def _jobs(lines: Lines, sections: dict[int, str], count: int, source: str) -> list[PlanJob]:
    jobs: list[PlanJob] = []
    for n, key, rest in lines.items:
        if key != "job":
            continue
        parts = rest.split(" ", 3)
        if len(parts) != 4 or not parts[0].isdigit() or int(parts[0]) != len(jobs) + 1:
            raise lines.error(n, "malformed job line")
        number = int(parts[0])
        if number not in sections:
            raise InputError(f"{source}: job {number} has no frozen plan")
        size = None if parts[1] == "-" else int(parts[1])
        manifest = manifest_body(sections[number], f"{source} (job {job_name(number)})")
        jobs.append(PlanJob(number, parts[3], size, parts[2], manifest))
    if not jobs or len(jobs) != count or sorted(sections) != list(range(1, count + 1)):
        raise InputError(f"{source}: the plan file lists {len(jobs)} job(s) for {count}")
    return jobs


def _schedule(lines: Lines, workers: int, s: dict, grid: Plan) -> Schedule:
    visits: list[list[Visit]] = [[] for _ in range(max(workers, 0))]
    devices, labels = [0] * len(visits), [""] * len(visits)
    for n, key, rest in lines.items:
        parts = rest.split(" ")
        try:
            if key == "worker":
                k = int(parts[0])
                devices[k], labels[k] = int(parts[1]), parts[2]
            elif key == "visit":
                k, b, first, end = (int(x) for x in parts)
                visits[k].append(Visit(b, first, end))
        except (ValueError, IndexError):
            raise lines.error(n, f"malformed {key} line") from None
    q = len(grid.query_bins)
    ordinals = sorted(v.ref_bin * q + g for vs in visits for v in vs for g in range(v.first, v.end))
    if not visits or ordinals != list(range(len(grid.units))):
        raise InputError(f"{lines.source}: the schedule does not cover every unit exactly once")
    return Schedule(s["policy"][1], s["reason"][1], visits, devices, labels, len(grid.ref_bins))
