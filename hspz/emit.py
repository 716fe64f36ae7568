"""The emitter: replays unit results in planned ordinal order into segments files.

Results may arrive in any order (several workers, several processes); each carries its ordinal.
A duplicate or out-of-plan ordinal is an error, and `finish` checks that every unit arrived.
Files are staged in a hidden directory inside OUT and moved into place only when the whole run
has succeeded, so a failed run leaves nothing that looks complete.
"""

from __future__ import annotations

import gzip
import io
import os
import shutil
import tarfile
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from hspz.engine import UnitResult
from hspz.errors import RunError
from hspz.plan import WorkUnit
from hspz.segments import format_lines
from hspz.sequence import PackedBin

TableLookup = Callable[[str, int, str], PackedBin]  # (side, bin, strand) -> record table


def segments_name(n: int, query_bin: int, ref_bin: int, strand: str) -> str:
    return f"tmp{n}.block{query_bin}.r{ref_bin}.{strand}.segments"


class Emitter:
    """Ordinal replay into OUT; one per job."""

    def __init__(self, units: Iterable[WorkUnit], tables: TableLookup, outdir: str | Path,
                 tarball: str | Path | None = None):
        self.units = {u.ordinal: u for u in units}
        self.tables = tables
        self.outdir = Path(outdir)
        self.tarball = Path(tarball) if tarball else None
        self.stage = self.outdir / f".hspz-partial-{os.getpid()}"
        self.pending: dict[int, UnitResult] = {}
        self.order = sorted(self.units)
        self.next = 0
        self.written: list[str] = []
        self.lines: list[bytes] = []
        self.counts = dict(seeds=0, hits=0, raw_hsps=0, hsps=0)

    def add(self, result: UnitResult) -> None:
        """Accept one unit's result; write every unit that is now next in order."""
        o = result.ordinal
        if o not in self.units:
            raise RunError(f"unit {o} is not in the plan")
        if o in self.pending or (self.next > 0 and o in self.order[: self.next]):
            raise RunError(f"unit {o} arrived twice")
        self.pending[o] = result
        while self.next < len(self.order) and self.order[self.next] in self.pending:
            self._write(self.pending.pop(self.order[self.next]))
            self.next += 1

    def _write(self, result: UnitResult) -> None:
        self.stage.mkdir(parents=True, exist_ok=True)
        for key in self.counts:
            self.counts[key] += getattr(result, key)
        ref = self.tables("reference", result.ref_bin, "plus")
        for n, strand, h in result.segments:
            if len(h) == 0:
                continue
            qry = self.tables("query", result.query_bin, strand)
            ordered = h if strand == "plus" else h[::-1]
            data = format_lines(ordered, ref, qry, strand)
            name = segments_name(n, result.query_bin, result.ref_bin, strand)
            (self.stage / name).write_bytes(data)
            self.written.append(name)
            self.lines.append(data)

    def finish(self) -> str:
        """Check completeness, publish the files (or the archive); return the digest."""
        missing = [o for o in self.order[self.next :]]
        if missing:
            raise RunError(f"{len(missing)} work unit(s) never arrived, first {missing[0]}")
        digest = digest_of(self.lines)
        self.outdir.mkdir(parents=True, exist_ok=True)
        if self.tarball is not None:
            write_tarball(self.tarball, self.stage, self.written)
        else:
            for name in self.written:
                os.replace(self.stage / name, self.outdir / name)
        shutil.rmtree(self.stage, ignore_errors=True)
        return digest

    def abort(self) -> None:
        shutil.rmtree(self.stage, ignore_errors=True)


def digest_of(chunks: list[bytes]) -> str:
    """First 16 hex digits of sha256 over all lines sorted bytewise (LC_ALL=C sort)."""
    import hashlib

    data = b"".join(chunks)
    h = hashlib.sha256()
    if data:
        lines = np.array(data.rstrip(b"\n").split(b"\n"), dtype=bytes)
        lines.sort()
        h.update(b"\n".join(lines.tolist()) + b"\n")
    return h.hexdigest()[:16]


def write_tarball(path: Path, stage: Path, names: list[str]) -> None:
    """A byte-reproducible .tar.gz: entries in emission order, mode 0644, mtime 0, bare names."""
    tmp = path.with_name(path.name + ".partial")
    with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            for name in names:
                data = (stage / name).read_bytes()
                info = tarfile.TarInfo(name)
                info.size, info.mode, info.mtime = len(data), 0o644, 0
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                tar.addfile(info, io.BytesIO(data))
    os.replace(tmp, path)
