"""The results file of `hspZ work`, and the unit files that make `work` resumable.

A results file is one worker's UnitResults in one .npz; its header names the plan (the plan
file's sha256), the worker, every unit as (job, ordinal) with its image's sha256, and a
checksum of itself; the zip comment seals every byte (`SEAL`).  A unit file is one unit's
result in the same format, keyed not by the plan but by its job's frozen plan (`unit_key`: the
manifest's lines that decide output), so a work job rerun after a kill, or the work of another
query-list run that holds the same job (a sheet with a row added), reuses it instead of computing it
again.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hspz.core import durable, hashing
from hspz.core.errors import InputError, sigterm_held
from hspz.engine.contract import UnitResult
from hspz.formats.manifest import INFORMATIONAL, Manifest, manifest_lines

RESULTS_FORMAT = 6  # 4: units keyed by (job, ordinal); unit files; 5: a whole-file seal;
# 6: each unit's formatted lines beside it, the digests of the jobs the file holds whole, and
# the seal hashed in pieces on threads


SEAL = b"hspz-pieces:"  # the zip comment: this, then `seal_of` every byte before the hex


SEAL_LEN = len(SEAL) + 64


def unit_key(m: Manifest) -> str:
    """A job's identity for its unit files: the sha256 of its manifest's lines without the
    informational ones (workers, threads, backend never change a byte)."""
    keep = [line for line in manifest_lines(m) if line.partition(" ")[0] not in INFORMATIONAL]
    return hashlib.sha256("".join(f"{line}\n" for line in keep).encode()).hexdigest()


def write_results(
    path: str | os.PathLike,
    results: Sequence[UnitResult],
    header: dict,
    digests: dict[int, str] | None = None,
) -> None:
    """UnitResults in one .npz, written under a temporary name; the header records each unit
    as (job, ordinal), each image's sha256 and its own checksum.  A result's formatted lines
    (`rendered`) go beside its image, as `text{j}_{o}` (the header: each file's name and
    length, or None), and `digests` (job -> digest of all its lines) into the header."""
    images = {(r.job, r.ordinal): r.to_bytes() for r in results}
    head = dict(
        header,
        format=RESULTS_FORMAT,
        units=[list(k) for k in images],
        sha256=[hashlib.sha256(b).hexdigest() for b in images.values()],
        text=[
            None if r.rendered is None else [[name, len(data)] for name, data in r.rendered]
            for r in results
        ],
        digests={str(j): d for j, d in sorted((digests or {}).items())},
    )
    head["checksum"] = _header_checksum(head)
    arrays = {f"unit{j}_{o}": np.frombuffer(b, np.uint8) for (j, o), b in images.items()}
    for r in results:
        if r.rendered is not None:
            text = b"".join(data for _, data in r.rendered)
            arrays[f"text{r.job}_{r.ordinal}"] = np.frombuffer(text, np.uint8)
    arrays["header"] = np.frombuffer(json.dumps(head).encode(), np.uint8)
    with durable.replaced(path, "--output") as tmp:
        with open(tmp, "wb") as fh, sigterm_held():  # zipfile cannot close a half-open member
            np.savez(fh, **arrays)  # type: ignore[arg-type]  # the stub fears a key allow_pickle
        seal_results(tmp)


def seal_of(fd: int, size: int) -> str:
    """The seal of the first `size` bytes of an open file: the sha256 of their pieces' sha256
    hex digests (`hashing.fd_pieces`, on threads: 169 MB took 0.12 s on one thread whole)."""
    return hashlib.sha256("".join(hashing.fd_pieces(fd, size)).encode()).hexdigest()


def seal_results(path: str | os.PathLike) -> None:
    """Make the zip's comment (its last bytes) the seal of every byte before it, the zip
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
        digest = seal_of(fh.fileno(), fh.tell())
        fh.write(digest.encode())


def _check_seal(source: str) -> None:
    """Every byte of a results file as `seal_results` sealed it."""
    with open(durable.open_regular(source), "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size < SEAL_LEN + 22:
            raise InputError(f"{source}: not a readable hspZ results file (too short)")
        fh.seek(size - SEAL_LEN)
        tail = fh.read(SEAL_LEN)
        if not tail.startswith(SEAL):
            raise InputError(
                f"{source}: no whole-file checksum: not a results file this hspZ "
                f"wrote (rerun `hspZ work`)"
            )
        try:
            digest = seal_of(fh.fileno(), size - 64)
        except hashing.ChangedWhileRead:
            digest = ""
    if digest.encode() != tail[len(SEAL) :]:
        raise InputError(
            f"{source}: checksum mismatch: the results file was edited or damaged "
            f"after `hspZ work` wrote it (its bytes, zip headers included, no "
            f"longer hash to its seal)"
        )


def _header_checksum(head: dict) -> str:
    rest = {k: v for k, v in head.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(rest, sort_keys=True).encode()).hexdigest()


# What a damaged .npz raises while it is read: zipfile's BadZipFile (bad CRC-32, no central
# directory), EOFError (empty or cut short), OSError, ValueError (not a zip and not .npy).
_DAMAGED = (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile, zipfile.LargeZipFile)


def _check_image(image: bytes, want: str, j: int, o: int, source: str) -> None:
    if hashlib.sha256(image).hexdigest() != want:
        raise InputError(
            f"{source}: unit {o} of job {j} is damaged (its sha256 differs "
            f"from the one in the header)"
        )


def results_header(path: str | os.PathLike) -> dict:
    """The header of one results file, checked with its members' CRCs and the file's seal
    (every byte), its units not kept: what `merge` checks of every argument before it
    publishes anything."""
    source = os.fspath(path)

    def check_units(z: np.lib.npyio.NpzFile, header: dict) -> None:
        for (j, o), want in zip(header["units"], header["sha256"], strict=True):
            _check_image(z[f"unit{j}_{o}"].tobytes(), want, j, o, source)  # one at a time
        _check_seal(source)

    header, _ = _open_results(source, check_units)
    return header


def _open_results(source: str, read: Callable) -> tuple[dict, Any]:
    """(header, read(z, header)) of a results file's checked header, a damaged or foreign file
    being one InputError line."""
    try:
        fh = open(durable.open_regular(source), "rb")  # a FIFO or a device: refused, not waited on
    except OSError as exc:
        raise InputError(f"{source}: cannot read it: {exc.strerror or exc}") from None
    try:
        with fh:
            z = np.load(fh, allow_pickle=False)
            if not isinstance(z, np.lib.npyio.NpzFile):
                raise InputError(f"{source}: not an hspZ results file (made by `hspZ work`)")
            with z:
                header = _results_header(z, source)
                return header, read(z, header)
    except _DAMAGED as exc:
        raise InputError(
            f"{source}: not a readable hspZ results file ({type(exc).__name__}: {exc})"
        ) from None


def read_results(path: str | os.PathLike) -> tuple[dict, list[UnitResult]]:
    """(header, UnitResults) of one results (or unit) file, every checksum checked;
    InputError when it is damaged, of another format or not a results file."""
    source = os.fspath(path)

    def members(z: np.lib.npyio.NpzFile, h: dict) -> tuple[dict, list]:
        images = {(j, o): z[f"unit{j}_{o}"].tobytes() for j, o in h["units"]}
        texts = [
            None if files is None else z[f"text{j}_{o}"].tobytes()
            for (j, o), files in zip(h["units"], h["text"], strict=True)
        ]
        return images, texts

    header, (images, texts) = _open_results(source, members)
    for ((j, o), image), want in zip(images.items(), header["sha256"], strict=True):
        _check_image(image, want, j, o, source)
    try:
        _check_seal(source)
    except OSError as exc:
        raise InputError(f"{source}: cannot read it: {exc.strerror or exc}") from None
    results = [UnitResult.from_file(io.BytesIO(image)) for image in images.values()]
    for (j, o), r, files, text in zip(images, results, header["text"], texts, strict=True):
        if (r.job, r.ordinal) != (j, o):
            raise InputError(
                f"{source}: unit {o} of job {j} holds the result of unit {r.ordinal} of job {r.job}"
            )
        if files is not None:
            r.rendered = _split_text(text, files, source, j, o)
    return header, results


def _split_text(text: bytes, files: list, source: str, j: int, o: int) -> list[tuple[str, bytes]]:
    """A unit's formatted lines cut into its files by the lengths the header gives."""
    if sum(size for _, size in files) != len(text):
        raise InputError(f"{source}: the formatted lines of unit {o} of job {j} are cut short")
    view, at, out = memoryview(text), 0, []
    for name, size in files:
        out.append((name, bytes(view[at : at + size])))
        at += size
    return out


def _results_header(z: np.lib.npyio.NpzFile, source: str) -> dict:
    """The header, its format, its checksum and the members it names checked."""
    if "header" not in z.files:
        raise InputError(f"{source}: not an hspZ results file (made by `hspZ work`)")
    assert z.zip is not None  # open: `np.load`'s NpzFile, not yet closed
    _check_members(z.zip, source)
    try:
        header = json.loads(z["header"].tobytes().decode())
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):  # nested too deep
        header = None
    if not isinstance(header, dict):
        raise InputError(f"{source}: the results header is not a JSON object")
    if header.get("format") != RESULTS_FORMAT:
        raise InputError(
            f"{source}: results format {header.get('format')!r} was written by "
            f"another hspZ; this one reads format {RESULTS_FORMAT} (rerun "
            f"`hspZ work`)"
        )
    if header.get("checksum") != _header_checksum(header):
        raise InputError(
            f"{source}: checksum mismatch: the results header was edited or "
            f"damaged after `hspZ work` wrote it"
        )
    units, digests = header.get("units"), header.get("sha256")
    text, jobs = header.get("text"), header.get("digests")
    ok = (
        isinstance(units, list)
        and isinstance(digests, list)
        and len(units) == len(digests)
        and all(
            isinstance(u, list) and len(u) == 2 and all(isinstance(x, int) for x in u)
            for u in units
        )
        and isinstance(text, list)
        and len(text) == len(units)
        and all(t is None or _files_listed(t) for t in text)
        and isinstance(jobs, dict)
        and all(
            _JOB.fullmatch(j) and isinstance(d, str) and _DIGEST.fullmatch(d)
            for j, d in jobs.items()
        )
        and len({(j, o) for j, o in units}) == len(units)  # each unit once
    )
    if not ok or not isinstance(units, list) or not isinstance(text, list):
        raise InputError(f"{source}: the results header does not list the file's units")
    members = sorted(f for f in z.files if f != "header")
    listed = [f"unit{j}_{o}" for j, o in units]
    listed += [f"text{j}_{o}" for (j, o), t in zip(units, text, strict=True) if t is not None]
    if members != sorted(listed):
        raise InputError(f"{source}: the results header does not list the file's units")
    return header


def _check_members(zf: zipfile.ZipFile, source: str) -> None:
    """Every member stored as `np.savez` stores it (not compressed), and no array claiming more
    bytes than its member holds: a forged shape (or a compressed member) made numpy allocate
    what the header claims before it found the data missing (a MemoryError, a traceback)."""
    for info in zf.infolist():
        if info.compress_type != zipfile.ZIP_STORED:
            raise InputError(
                f"{source}: member {info.filename!r} is compressed: not a results file "
                f"`hspZ work` wrote"
            )
        with zf.open(info) as fh:
            version = np.lib.format.read_magic(fh)
            read = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, _, dtype = read(fh)
        if math.prod(shape) * dtype.itemsize > info.compress_size:
            raise InputError(
                f"{source}: member {info.filename!r} claims more bytes than it holds (a damaged or "
                f"forged results file: rerun `hspZ work`)"
            )


_JOB = re.compile(r"0|[1-9][0-9]*")
_DIGEST = re.compile(r"[0-9a-f]{16}")


def _files_listed(files: object) -> bool:
    """A unit's text entry: [[file name, length], ...]."""
    return isinstance(files, list) and all(
        isinstance(f, list)
        and len(f) == 2
        and isinstance(f[0], str)
        and isinstance(f[1], int)
        and f[1] >= 0
        for f in files
    )


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
    if (
        header.get("kind") != "unit"
        or header.get("job_key") != key
        or len(results) != 1
        or results[0].ordinal != ordinal
    ):
        return None
    result = results[0]
    result.job = job
    return result


def write_unit(folder: str | os.PathLike, key: str, result: UnitResult) -> None:
    """One finished unit's result, atomically, under its `unit_path` (job index 0: the file
    belongs to the job's plan, not to one query-list run)."""
    saved = UnitResult(**{**result.__dict__, "job": 0, "rendered": None})
    write_results(unit_path(folder, key, result.ordinal), [saved], dict(kind="unit", job_key=key))
