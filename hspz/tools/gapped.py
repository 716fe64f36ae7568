"""The optional gapped stage: hand each segments file of one job to LASTZ as KegAlign hands
them (`hspZ gapped`, the workflow's `gapped: true`).

KegAlign runs, per segments file `tmp<n>.block<q>.r<r>.<strand>.segments`,

    lastz REF[nameparse=darkspace][multiple][subset=<ref bin r's names>]
          QUERY[nameparse=darkspace][subset=<query bin q's names>]
          --strand=<plus|minus> --segments=FILE --format=FMT ...

and so does this module, file by file in emission order, concatenating the alignments (a
fixed `##maf version=1` header for MAF, so the output is reproducible).  The files cannot be
concatenated and given to one LASTZ: for a multi-record query LASTZ wants its segments in
query order, plus before minus, per record.  LASTZ reads no gzip, so the inputs are written as
2bit first, as KegAlign's faToTwoBit writes them: a byte other than ACGTN (any case) becomes N
(n when lowercase).

A job's output is, by definition, the concatenation of its files' outputs in emission order,
where only the first file's output carries the header (MAF's fixed line, general's column
line).  So the files can be cut into consecutive groups (`split_groups`, a bound on each
group's segments bytes), each group extended by its own LASTZ process side by side
(`extend_group`), and the groups' outputs concatenated in order: the same bytes.  AXT blocks
are numbered from 0 by each LASTZ process, so in a job's AXT the numbering restarts with every
segments file (as in KegAlign's concatenated outputs); tools that read AXT ignore it.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from hspz.core import durable
from hspz.core.durable import replaced
from hspz.core.errors import InputError, RunError
from hspz.formats.manifest import Manifest, check_side
from hspz.io.readers import read_records
from hspz.io.records import Record
from hspz.io.twobit import write_2bit
from hspz.run.emit import OUR_NAMES
from hspz.tools.plots import check_names, read_segments

FORMATS = ("maf", "maf-", "axt", "general", "general-")
MAF_HEADER = b"##maf version=1 scoring=lastz\n"
_ORDER = re.compile(r"tmp(\d+)\.block(\d+)\.r(\d+)\.(plus|minus)(?:\.split(\d+))?\.segments")


def emission_order(names: list[str], n_query_bins: int) -> list[str]:
    """Segments file names in the order hspZ writes them: units by ordinal (reference bin
    major), inside a unit interval 1 plus, 1 minus, 2 plus, ..., -D splits in order."""

    def key(name: str) -> tuple[int, int, bool, int]:
        match = _ORDER.fullmatch(name)
        assert match is not None  # OUR_NAMES matched it
        n, q, r, strand, split = match.groups()
        return (int(r) * n_query_bins + int(q), int(n), strand == "minus", int(split or 0))

    return sorted((n for n in names if OUR_NAMES.fullmatch(n)), key=key)


def check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise InputError(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")


def file_format(fmt: str, first: bool) -> str:
    """The lastz --format of one segments file: only a job's first file prints general's
    column line; MAF's header is written by hspZ (lastz's names temporary paths)."""
    if fmt == "maf":
        return "maf-"
    return fmt if first or fmt != "general" else "general-"


def header(fmt: str) -> bytes:
    """What hspZ writes before the first file's alignments."""
    return MAF_HEADER if fmt == "maf" else b""


def split_groups(sizes: Sequence[tuple[str, int]], bound: int) -> list[list[str]]:
    """Consecutive groups of (name, bytes) in the given order, each at most `bound` bytes
    unless one file alone is larger; a job without files is one empty group (its header)."""
    groups: list[list[str]] = [[]]
    total = 0
    for name, size in sizes:
        if groups[-1] and total + size > bound:
            groups.append([])
            total = 0
        groups[-1].append(name)
        total += size
    return groups


def write_groups(path: str | os.PathLike, groups: list[list[str]]) -> None:
    """One line per group: its segments file names, space-separated (an empty group, an
    empty line)."""
    with replaced(path, "--output") as tmp:
        tmp.write_text("".join(" ".join(g) + "\n" for g in groups))


def read_groups(path: str | os.PathLike) -> list[list[str]]:
    try:
        lines = Path(path).read_text().split("\n")
    except OSError as exc:
        raise InputError(f"--groups: cannot read {path}: {exc.strerror or exc}") from None
    groups = [line.split() for line in lines[:-1]]
    if lines[-1] or not groups:
        raise InputError(f"--groups: {path} is not a groups file (one line per group)")
    return groups


def _two_bit_table() -> np.ndarray:
    table = np.full(256, ord("N"), np.uint8)
    table[np.arange(ord("a"), ord("z") + 1)] = ord("n")
    for base in b"ACGTNacgtn":
        table[base] = base
    return table


TWO_BIT = _two_bit_table()


def lastz_input(records: Sequence[Record], folder: Path, stem: str) -> Path:
    """Records as a 2bit file LASTZ reads (bytes 2bit cannot hold become N or n)."""
    path = folder / f"{stem}.2bit"
    write_2bit(path, [Record(r.name, TWO_BIT[r.seq]) for r in records])
    return path


def write_reference(m: Manifest, reference: str, output: str | os.PathLike) -> None:
    """The reference as the 2bit LASTZ reads, once for every group job of a query-list run (checked
    against the plan's records first)."""
    found = read_records(reference)
    check_side(m, "reference", found, reference)
    records = [Record(r.name, TWO_BIT[r.seq]) for r in found]
    with replaced(output, "--output") as tmp:
        write_2bit(tmp, records)


def extend_group(
    m: Manifest,
    reference: str,
    query: str,
    segments: Path,
    files: list[str],
    first: bool,
    output: str,
    lastz: str = "lastz",
    fmt: str = "maf",
    flags: str = "",
    reference_2bit: str | None = None,
) -> int:
    """LASTZ's gapped extension of `files` (a group of one job's segments files, in emission
    order) into `output`, with the header when the group holds the job's first file; the
    files run.  `reference_2bit`: the reference already written by `write_reference`."""
    check_format(fmt)
    check_tables(m, segments, files)
    with tempfile.TemporaryDirectory(prefix="hspz-gapped-") as tmp:
        folder = Path(tmp)
        ref = (
            Path(reference_2bit)
            if reference_2bit
            else lastz_input(_checked(m, "reference", reference), folder, "reference")
        )
        qry = lastz_input(_checked(m, "query", query), folder, "query")
        for side, bins, recs in (
            ("r", m.plan.ref_bins, m.ref_names),
            ("q", m.plan.query_bins, m.qry_names),
        ):
            for b, members in enumerate(bins):
                durable.write_new(
                    folder / f"{side}{b}.names", "".join(f"{recs[k]}\n" for k in members).encode()
                )
        parts = [header(fmt) if first else b""]
        for k, name in enumerate(files):
            match = _ORDER.fullmatch(name)
            assert match is not None  # emission_order kept only our names
            _, q, r, strand, _ = match.groups()
            argv = [
                lastz,
                f"{ref}[nameparse=darkspace][multiple][subset={folder / f'r{r}.names'}]",
                f"{qry}[nameparse=darkspace][subset={folder / f'q{q}.names'}]",
                f"--strand={strand}",
                f"--segments={segments / name}",
                f"--format={file_format(fmt, first and k == 0)}",
                *shlex.split(flags),
            ]
            parts.append(_lastz(argv))
    with replaced(output, "--output") as tmp:
        tmp.write_bytes(b"".join(parts))
    return len(files)


def check_tables(m: Manifest, segments: Path, files: list[str]) -> None:
    """Each segments file a regular, readable table of the plan's job: a bad table is one line
    here, not lastz's complaint."""
    for name in files:
        if not (segments / name).is_file():
            raise InputError(f"SEGMENTS: {segments / name} is not a regular file")
        try:
            texts = [(segments / name).read_bytes()]
        except OSError as exc:
            raise InputError(
                f"SEGMENTS: cannot read {segments / name}: {exc.strerror or exc}"
            ) from None
        check_names(read_segments(texts), m.ref_names, m.qry_names)


def _checked(m: Manifest, side: str, path: str) -> list[Record]:
    records = read_records(path)
    check_side(m, side, records, path)
    return records


def job_files(m: Manifest, segments: Path) -> list[str]:
    """The job's segments file names in emission order."""
    return emission_order([p.name for p in segments.iterdir()], len(m.plan.query_bins))


def run_gapped(
    m: Manifest,
    reference: str,
    query: str,
    segments: Path,
    output: str,
    lastz: str = "lastz",
    fmt: str = "maf",
    flags: str = "",
) -> int:
    """LASTZ's gapped extension of one job's segments files into `output`; the files run."""
    check_format(fmt)
    return extend_group(
        m, reference, query, segments, job_files(m, segments), True, output, lastz, fmt, flags
    )


def _lastz(argv: list[str]) -> bytes:
    try:
        done = subprocess.run(argv, capture_output=True)
    except OSError as exc:
        raise RunError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        raise RunError(
            f"lastz failed on {os.path.basename(argv[4].split('=', 1)[1])} "
            f"(exit {done.returncode}): {tail[0]}"
        )
    return done.stdout
