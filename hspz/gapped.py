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
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from hspz import durable
from hspz.durable import replaced
from hspz.emit import OUR_NAMES
from hspz.errors import InputError, RunError
from hspz.manifest import Manifest, check_side
from hspz.plots import check_names, read_segments
from hspz.sequence import Record, read_records, write_2bit

FORMATS = ("maf", "maf-", "general", "general-")
MAF_HEADER = b"##maf version=1 scoring=lastz\n"
_ORDER = re.compile(r"tmp(\d+)\.block(\d+)\.r(\d+)\.(plus|minus)(?:\.split(\d+))?\.segments")


def emission_order(names: list[str], n_query_bins: int) -> list[str]:
    """Segments file names in the order hspZ writes them: units by ordinal (reference bin
    major), inside a unit interval 1 plus, 1 minus, 2 plus, ..., -D splits in order."""
    def key(name: str):
        n, q, r, strand, split = _ORDER.fullmatch(name).groups()
        return (int(r) * n_query_bins + int(q), int(n), strand == "minus", int(split or 0))

    return sorted((n for n in names if OUR_NAMES.fullmatch(n)), key=key)


def _two_bit_table() -> np.ndarray:
    table = np.full(256, ord("N"), np.uint8)
    table[np.arange(ord("a"), ord("z") + 1)] = ord("n")
    for base in b"ACGTNacgtn":
        table[base] = base
    return table


TWO_BIT = _two_bit_table()


def lastz_input(records, folder: Path, stem: str) -> Path:
    """Records as a 2bit file LASTZ reads (bytes 2bit cannot hold become N or n)."""
    path = folder / f"{stem}.2bit"
    write_2bit(path, [Record(r.name, TWO_BIT[r.seq]) for r in records])
    return path


def run_gapped(m: Manifest, reference: str, query: str, segments: Path, output: str,
               lastz: str = "lastz", fmt: str = "maf", flags: str = "") -> int:
    """LASTZ's gapped extension of one job's segments files into `output`; the files run."""
    if fmt not in FORMATS:
        raise InputError(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")
    names = emission_order([p.name for p in segments.iterdir()], len(m.plan.query_bins))
    for name in names:  # a bad table is one line here, not lastz's complaint
        if not (segments / name).is_file():
            raise InputError(f"SEGMENTS: {segments / name} is not a regular file")
        try:
            texts = [(segments / name).read_bytes()]
        except OSError as exc:
            raise InputError(f"SEGMENTS: cannot read {segments / name}: "
                             f"{exc.strerror or exc}") from None
        check_names(read_segments(texts), m.ref_names, m.qry_names)
    with tempfile.TemporaryDirectory(prefix="hspz-gapped-") as tmp:
        folder = Path(tmp)
        records = {}
        for side, path in (("reference", reference), ("query", query)):
            records[side] = read_records(path)
            check_side(m, side, records[side], path)
        ref = lastz_input(records["reference"], folder, "reference")
        qry = lastz_input(records["query"], folder, "query")
        del records
        for side, bins, recs in (("r", m.plan.ref_bins, m.ref_names),
                                 ("q", m.plan.query_bins, m.qry_names)):
            for b, members in enumerate(bins):
                durable.write_new(folder / f"{side}{b}.names",
                                  "".join(f"{recs[k]}\n" for k in members).encode())
        parts = []
        for k, name in enumerate(names):
            _, q, r, strand, _ = _ORDER.fullmatch(name).groups()
            each = "maf-" if fmt == "maf" else (fmt if k == 0 else f"{fmt.rstrip('-')}-")
            argv = [lastz,
                    f"{ref}[nameparse=darkspace][multiple][subset={folder / f'r{r}.names'}]",
                    f"{qry}[nameparse=darkspace][subset={folder / f'q{q}.names'}]",
                    f"--strand={strand}", f"--segments={segments / name}", f"--format={each}",
                    *shlex.split(flags)]
            parts.append(_lastz(argv))
    with replaced(output, "--output") as tmp:
        tmp.write_bytes((MAF_HEADER if fmt == "maf" else b"") + b"".join(parts))
    return len(names)


def _lastz(argv: list[str]) -> bytes:
    try:
        done = subprocess.run(argv, capture_output=True)
    except OSError as exc:
        raise RunError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        raise RunError(f"lastz failed on {os.path.basename(argv[4].split('=', 1)[1])} "
                       f"(exit {done.returncode}): {tail[0]}")
    return done.stdout
