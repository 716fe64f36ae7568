"""The workflow's frozen files: the plan file of `hspZ plan`, the results file of `hspZ work`,
and the unit files that make `work` resumable.

A plan file is text, sealed by one checksum line (`manifest.sealed`): the mode (`single`: one
query, its output in OUT; `batch`: a query list, OUT/000001/, ...), the reference's path and
the index's, the schedule for W workers (over the batch's axis of every job's query bins,
`batch.BatchAxis`), and per job its query file (size and sha256 when planned) and its frozen
plan, the lines of the manifest `--dump-manifest` writes for it.

A results file is one worker's UnitResults in one .npz; its header names the plan (the plan
file's sha256), the worker, every unit as (job, ordinal) with its image's sha256, and a
checksum of itself.  A unit file is one unit's result in the same format, keyed not by the plan
but by its job's frozen plan (`unit_key`: the manifest's lines that decide output), so a work
job rerun after a kill, or the work of another batch that holds the same job (a sheet with a
row added), reuses it instead of computing it again.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hspz.core import durable
from hspz.core.errors import InputError, UsageError
from hspz.engine.contract import UnitResult
from hspz.formats.manifest import (
    INFORMATIONAL,
    Manifest,
    _check_format,
    _int,
    _Lines,
    _manifest_body,
    _read,
    manifest_lines,
    sealed,
    unsealed,
)
from hspz.planning.joblist import BatchAxis, job_name
from hspz.planning.memory import Plan
from hspz.planning.schedule import Schedule, Visit, schedule_lines

PLAN_FORMAT = 3  # 3: batches (jobs, an index path)
RESULTS_FORMAT = 5  # 4: units keyed by (job, ordinal); unit files; 5: a whole-file seal
SEAL = b"hspz-sha256:"  # the zip comment: this, then the sha256 of every byte before the hex
SEAL_LEN = len(SEAL) + 64


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
    batch: bool
    digest: str = ""  # sha256 of the file's bytes

    @property
    def manifest(self) -> Manifest:
        return self.jobs[0].manifest

    @property
    def query(self) -> str:
        return self.jobs[0].path

    @property
    def axis(self) -> BatchAxis:
        return BatchAxis(tuple(len(j.manifest.plan.query_bins) for j in self.jobs))

    def grid(self) -> Plan:
        """The plan the schedule covers: the reference bins by every job's query bins."""
        return self.axis.plan(self.manifest.plan.ref_bins)

    def worker_units(self, k: int) -> list[tuple[int, int]]:
        """(job index, ordinal) of every unit worker k runs."""
        axis = self.axis
        return [axis.job_ordinal(v.ref_bin, g) for v in self.schedule.visits[k]
                for g in range(v.first, v.end)]


def plan_text(pf: PlanFile) -> str:
    """The sealed text of a plan file."""
    for p in [pf.reference or "-", pf.index or "-", *(j.path for j in pf.jobs)]:
        if "\n" in p:
            raise UsageError(f"an input path holds a newline: {p!r}")
    s = pf.schedule
    lines = [f"hspz-plan {PLAN_FORMAT}", f"mode {'batch' if pf.batch else 'single'}",
             f"reference_path {pf.reference or '-'}", f"index_path {pf.index or '-'}",
             f"workers {s.workers}", f"policy {s.policy}", f"reason {s.reason}"]
    for k, visits in enumerate(s.visits):
        lines.append(f"worker {k} {s.devices[k]} {s.labels[k]}")
        lines += [f"visit {k} {v.ref_bin} {v.first} {v.end}" for v in visits]
    lines += schedule_lines(s)  # the lines `hspZ plan` prints, for readers
    lines.append(f"jobs {len(pf.jobs)}")
    for j in pf.jobs:
        size = "-" if j.size is None else str(j.size)
        lines.append(f"job {j.number} {size} {j.sha256} {j.path}")
    for j in pf.jobs:
        lines += [f"job-manifest {j.number}", *manifest_lines(j.manifest),
                  f"end-manifest {j.number}"]
    return sealed("".join(f"{line}\n" for line in lines))


def read_plan(path: str | os.PathLike) -> PlanFile:
    """A plan file, its checksum, schedule and every job's manifest checked; InputError names
    the file."""
    return read_plan_bytes(_read(path), os.fspath(path))


def read_plan_bytes(data: bytes, source: str) -> PlanFile:
    _check_format(data, source, "hspz-plan", PLAN_FORMAT, "plan file")
    head, sections = _sections(unsealed(data, source, "plan file"), source)
    lines = _Lines(head, source)
    s = lines.scalars(["hspz-plan", "mode", "reference_path", "index_path", "workers",
                       "policy", "reason", "jobs"])
    jobs = _jobs(lines, sections, _int(lines, s["jobs"], "jobs"), source)
    mode = s["mode"][1]
    if mode not in ("single", "batch") or (mode == "single" and len(jobs) != 1):
        raise lines.error(s["mode"][0], f"bad mode {mode!r}")
    pf = PlanFile(Schedule("", "", [], []), _path(s["reference_path"][1]),
                  _path(s["index_path"][1]), jobs, mode == "batch",
                  hashlib.sha256(data).hexdigest())
    if any(j.manifest.plan.ref_bins != jobs[0].manifest.plan.ref_bins for j in jobs):
        raise InputError(f"{source}: the jobs do not share the reference bins")
    pf.schedule = _schedule(lines, _int(lines, s["workers"], "workers"), s, pf.grid())
    return pf


def _path(text: str) -> str | None:
    return None if text == "-" else text


def _sections(text: str, source: str) -> tuple[str, dict[int, str]]:
    """The plan file's own lines, and each job's manifest lines by job number."""
    head, sections, current, body = [], {}, None, []
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


def _jobs(lines: _Lines, sections: dict[int, str], count: int, source: str) -> list[PlanJob]:
    jobs = []
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
        manifest = _manifest_body(sections[number], f"{source} (job {job_name(number)})")
        jobs.append(PlanJob(number, parts[3], size, parts[2], manifest))
    if not jobs or len(jobs) != count or sorted(sections) != list(range(1, count + 1)):
        raise InputError(f"{source}: the plan file lists {len(jobs)} job(s) for {count}")
    return jobs


def _schedule(lines: _Lines, workers: int, s: dict, grid: Plan) -> Schedule:
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
    ordinals = sorted(v.ref_bin * q + g for vs in visits for v in vs
                      for g in range(v.first, v.end))
    if not visits or ordinals != list(range(len(grid.units))):
        raise InputError(f"{lines.source}: the schedule does not cover every unit exactly once")
    return Schedule(s["policy"][1], s["reason"][1], visits, devices, labels,
                    len(grid.ref_bins))


# --------------------------------------------------------------------------------------------
# Results and unit files (hspZ work -> merge)
# --------------------------------------------------------------------------------------------


def unit_key(m: Manifest) -> str:
    """A job's identity for its unit files: the sha256 of its manifest's lines without the
    informational ones (workers, threads, backend never change a byte)."""
    keep = [line for line in manifest_lines(m)
            if line.partition(" ")[0] not in INFORMATIONAL]
    return hashlib.sha256("".join(f"{line}\n" for line in keep).encode()).hexdigest()


def write_results(path: str | os.PathLike, results: Sequence[UnitResult], header: dict) -> None:
    """UnitResults in one .npz, written under a temporary name; the header records each unit
    as (job, ordinal), each image's sha256 and its own checksum."""
    images = {(r.job, r.ordinal): r.to_bytes() for r in results}
    head = dict(header, format=RESULTS_FORMAT, units=[list(k) for k in images],
                sha256=[hashlib.sha256(b).hexdigest() for b in images.values()])
    head["checksum"] = _header_checksum(head)
    arrays = {f"unit{j}_{o}": np.frombuffer(b, np.uint8) for (j, o), b in images.items()}
    arrays["header"] = np.frombuffer(json.dumps(head).encode(), np.uint8)
    with durable.replaced(path, "--output") as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
        seal_results(tmp)


def seal_results(path: str | os.PathLike) -> None:
    """Make the zip's comment (its last bytes) the sha256 of every byte before it, the zip
    headers included, so that `read_results` finds any changed bit: the comment length is set
    in the end-of-central-directory record, SEAL appended, the file hashed, the hex appended."""
    with open(path, "r+b") as fh:
        fh.seek(-22, os.SEEK_END)
        eocd = fh.read(22)
        if eocd[:4] != b"PK\x05\x06" or eocd[20:22] != b"\0\0":
            raise ValueError(f"{os.fspath(path)}: not a zip without a comment")
        fh.seek(-2, os.SEEK_END)
        fh.write(SEAL_LEN.to_bytes(2, "little") + SEAL)
        fh.flush()
        fh.seek(0)
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
        fh.seek(0, os.SEEK_END)
        fh.write(digest.encode())


def _check_seal(source: str) -> None:
    """Every byte of a results file as `seal_results` sealed it."""
    with open(source, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size < SEAL_LEN + 22:
            raise InputError(f"{source}: not a readable hspZ results file (too short)")
        fh.seek(size - SEAL_LEN)
        tail = fh.read(SEAL_LEN)
        if not tail.startswith(SEAL):
            raise InputError(f"{source}: no whole-file checksum: not a results file this hspZ "
                             f"wrote (rerun `hspZ work`)")
        fh.seek(0)
        h = hashlib.sha256()
        left = size - 64
        while left:
            chunk = fh.read(min(left, 1 << 22))
            if not chunk:
                break
            h.update(chunk)
            left -= len(chunk)
    if h.hexdigest().encode() != tail[len(SEAL):]:
        raise InputError(f"{source}: checksum mismatch: the results file was edited or damaged "
                         f"after `hspZ work` wrote it (its bytes, zip headers included, no "
                         f"longer hash to its seal)")


def _header_checksum(head: dict) -> str:
    rest = {k: v for k, v in head.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(rest, sort_keys=True).encode()).hexdigest()


# What a damaged .npz raises while it is read: zipfile's BadZipFile (bad CRC-32, no central
# directory), EOFError (empty or cut short), OSError, ValueError (not a zip and not .npy).
_DAMAGED = (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile, zipfile.LargeZipFile)


def _check_image(image: bytes, want: str, j: int, o: int, source: str) -> None:
    if hashlib.sha256(image).hexdigest() != want:
        raise InputError(f"{source}: unit {o} of job {j} is damaged (its sha256 differs "
                         f"from the one in the header)")


def results_header(path: str | os.PathLike) -> dict:
    """The header of one results file, checked with its members' CRCs and the file's seal
    (every byte), its units not kept: what `merge` checks of every argument before it
    publishes anything."""
    source = os.fspath(path)

    def check_units(z, header: dict) -> None:
        for (j, o), want in zip(header["units"], header["sha256"], strict=True):
            _check_image(z[f"unit{j}_{o}"].tobytes(), want, j, o, source)  # one at a time
        _check_seal(source)

    header, _ = _open_results(source, check_units)
    return header


def _open_results(source: str, read: Callable) -> tuple[dict, object]:
    """(header, read(z, header)) of a results file's checked header, a damaged or foreign file
    being one InputError line."""
    try:
        z = np.load(source, allow_pickle=False)
        if not isinstance(z, np.lib.npyio.NpzFile):
            raise InputError(f"{source}: not an hspZ results file (made by `hspZ work`)")
        with z:
            header = _results_header(z, source)
            return header, read(z, header)
    except _DAMAGED as exc:
        raise InputError(f"{source}: not a readable hspZ results file "
                         f"({type(exc).__name__}: {exc})") from None


def read_results(path: str | os.PathLike) -> tuple[dict, list[UnitResult]]:
    """(header, UnitResults) of one results (or unit) file, every checksum checked;
    InputError when it is damaged, of another format or not a results file."""
    source = os.fspath(path)
    header, images = _open_results(
        source, lambda z, h: {(j, o): z[f"unit{j}_{o}"].tobytes() for j, o in h["units"]})
    for ((j, o), image), want in zip(images.items(), header["sha256"], strict=True):
        _check_image(image, want, j, o, source)
    try:
        _check_seal(source)
    except OSError as exc:
        raise InputError(f"{source}: cannot read it: {exc.strerror or exc}") from None
    results = [UnitResult.from_file(io.BytesIO(image)) for image in images.values()]
    for (j, o), r in zip(images, results, strict=True):
        if (r.job, r.ordinal) != (j, o):
            raise InputError(f"{source}: unit {o} of job {j} holds the result of unit "
                             f"{r.ordinal} of job {r.job}")
    return header, results


def _results_header(z, source: str) -> dict:
    """The header, its format, its checksum and the members it names checked."""
    if "header" not in z.files:
        raise InputError(f"{source}: not an hspZ results file (made by `hspZ work`)")
    try:
        header = json.loads(z["header"].tobytes().decode())
    except (UnicodeDecodeError, json.JSONDecodeError):
        header = None
    if not isinstance(header, dict):
        raise InputError(f"{source}: the results header is not a JSON object")
    if header.get("format") != RESULTS_FORMAT:
        raise InputError(f"{source}: results format {header.get('format')!r} was written by "
                         f"another hspZ; this one reads format {RESULTS_FORMAT} (rerun "
                         f"`hspZ work`)")
    if header.get("checksum") != _header_checksum(header):
        raise InputError(f"{source}: checksum mismatch: the results header was edited or "
                         f"damaged after `hspZ work` wrote it")
    units, digests = header.get("units"), header.get("sha256")
    ok = isinstance(units, list) and isinstance(digests, list) and len(units) == len(digests) \
        and all(isinstance(u, list) and len(u) == 2 and all(isinstance(x, int) for x in u)
                for u in units)
    members = sorted(f for f in z.files if f != "header")
    if not ok or members != sorted(f"unit{j}_{o}" for j, o in units):
        raise InputError(f"{source}: the results header does not list the file's units")
    return header


def unit_path(folder: str | os.PathLike, key: str, ordinal: int) -> Path:
    """The unit file of unit `ordinal` of the job whose `unit_key` is `key`."""
    return Path(folder) / f"{key[:32]}-{ordinal:06d}.unit"


def read_unit(path: Path, key: str, job: int, ordinal: int) -> UnitResult | None:
    """The result a unit file holds for (key, ordinal), as job `job` of this plan; None when
    there is none, or it is damaged or another job's (it is then computed again)."""
    if not path.is_file():
        return None
    try:
        header, results = read_results(path)
    except InputError:
        return None
    if header.get("kind") != "unit" or header.get("job_key") != key or len(results) != 1 \
            or results[0].ordinal != ordinal:
        return None
    result = results[0]
    result.job = job
    return result


def write_unit(folder: str | os.PathLike, key: str, result: UnitResult) -> None:
    """One finished unit's result, atomically, under its `unit_path` (job index 0: the file
    belongs to the job's plan, not to one batch)."""
    saved = UnitResult(**{**result.__dict__, "job": 0})
    write_results(unit_path(folder, key, result.ordinal), [saved],
                  dict(kind="unit", job_key=key))
