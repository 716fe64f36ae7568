"""`hspZ compare`: run `lastz --nogapped` with the same settings beside hspZ and judge parity.

LASTZ reads neither gzip nor names past `|`, so both inputs are rewritten as plain FASTA with
hspZ's record names and handed over as `FILE[multiple,nameparse=darkspace]`.  Both line sets are
sorted and classified (docs/compare.md): EXACT, DUPLICATES-ONLY, CONTAINED-EXTRA or DIFFERENT,
and a DIFFERENT verdict says whether it lies within the band real pairs show (`BAND`).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from hspz.core import durable
from hspz.core.errors import RunError, UsageError
from hspz.core.options import Options
from hspz.core.scoring import score_text
from hspz.engine import backends
from hspz.io.fasta import write_fasta
from hspz.planning.inputs import read_inputs
from hspz.run.driver import drive_given

FORMAT = "general-:name1,start1,end1,name2,start2,end2,strand2,score"


def lastz_args(options: Options, scores: Path | None = None) -> list[str]:
    """The lastz flags that match these options (`scores`: the score file lastz reads in place
    of --scoring's path)."""
    o = options
    args = [
        "--nogapped",
        f"--format={FORMAT}",
        f"--strand={o.strand}",
        f"--step={o.step}",
        f"--xdrop={o.xdrop}",
        f"--hspthresh={o.hspthresh}",
    ]
    args.append(f"--seed={o.seed}" if o.seed in ("12of19", "14of22") else f"--seed=match{o.seed}")
    if o.seed not in ("12of19", "14of22"):
        args[-1] = f"--seed={o.pattern.replace('T', '1')}"
    args.append("--transition" if o.transition else "--notransition")
    args.append("--entropy" if o.entropy else "--noentropy")
    if o.ambiguous:
        args.append(f"--ambiguous={o.ambiguous}")
    if o.scoring:
        args.append(f"--scores={scores or o.scoring}")
    return args


def check_lastz(lastz: str) -> None:
    if shutil.which(lastz) is None:
        raise UsageError(f"--lastz: '{lastz}' is not an executable on PATH")


def run_lastz(
    lastz: str, options: Options, ref_fa: Path, qry_fa: Path, scores: Path | None = None
) -> list[bytes]:
    cmd = [lastz, f"{ref_fa}[multiple,nameparse=darkspace]", f"{qry_fa}[nameparse=darkspace]"]
    proc = subprocess.run(cmd + lastz_args(options, scores), capture_output=True)
    if proc.returncode != 0:
        msg = proc.stderr.decode(errors="replace").strip().splitlines()
        raise RunError(f"lastz failed: {msg[0] if msg else proc.returncode}")
    return sorted(proc.stdout.splitlines())


def _fields(line: bytes) -> tuple[tuple[bytes, bytes, bytes], int, int, int]:
    f = line.split(b"\t")
    return (f[0], f[3], f[6]), int(f[1]), int(f[2]), int(f[4])


def _nested_in(line: bytes, others: list[bytes]) -> bool:
    (pair, r0, r1, q0) = _fields(line)
    for other in others:
        (opair, o0, o1, oq0) = _fields(other)
        same_diag = (r0 - q0) == (o0 - oq0)
        if opair == pair and same_diag and ((o0 <= r0 and r1 <= o1) or (r0 <= o0 and o1 <= r1)):
            return True
    return False


def verdict(ours: list[bytes], theirs: list[bytes]) -> tuple[str, list[bytes], list[bytes]]:
    """(verdict, lines only hspZ has, lines only LASTZ has), multiset-wise."""
    if ours == theirs:
        return "EXACT", [], []
    count_o: defaultdict[bytes, int] = defaultdict(int)
    count_t: defaultdict[bytes, int] = defaultdict(int)
    for line in ours:
        count_o[line] += 1
    for line in theirs:
        count_t[line] += 1
    only_o = [k for k in sorted(count_o) for _ in range(count_o[k] - count_t.get(k, 0))]
    only_t = [k for k in sorted(count_t) for _ in range(count_t[k] - count_o.get(k, 0))]
    if set(count_o) == set(count_t):
        return "DUPLICATES-ONLY", only_o, only_t
    by_pair = defaultdict(list)
    for line in ours + theirs:
        by_pair[_fields(line)[0]].append(line)
    extras_o = [x for x in only_o if x not in count_t]
    extras_t = [x for x in only_t if x not in count_o]
    if all(
        _nested_in(x, [y for y in by_pair[_fields(x)[0]] if y in count_t]) for x in extras_o
    ) and all(_nested_in(x, [y for y in by_pair[_fields(x)[0]] if y in count_o]) for x in extras_t):
        return "CONTAINED-EXTRA", only_o, only_t
    return "DIFFERENT", only_o, only_t


KEPT = ("hspz.sorted", "lastz.sorted")  # the files --keep writes
# On real pairs LASTZ's diagonal history makes 0.3-0.7% of either side's lines differ (docs/
# compare.md): a DIFFERENT verdict is expected while both sides share at least this share.
BAND = 0.99


def verdict_line(name: str, n_ours: int, n_theirs: int, only_o: int, only_t: int) -> str:
    """The verdict as printed: the name, and for DIFFERENT whether the shared lines lie within
    the band real pairs show (BAND of each side) or outside it, where it is worth a report."""
    if name == "EXACT":
        return "verdict: EXACT"
    counts = f"only hspZ: {only_o}, only lastz: {only_t}"
    if name != "DIFFERENT":
        return f"verdict: {name} ({counts})"
    shares = [(n - only) / n if n else 1.0 for n, only in ((n_ours, only_o), (n_theirs, only_t))]
    shared = f"shared: {shares[0]:.2%} of hspZ's lines, {shares[1]:.2%} of lastz's"
    if min(shares) >= BAND:
        return f"verdict: DIFFERENT, within the expected band for real pairs ({shared}; {counts})"
    return (
        f"verdict: DIFFERENT, outside the expected band for real pairs (at least "
        f"{BAND:.0%} shared each way; {shared}; {counts}): worth a bug report with both "
        f"sorted files (--keep)"
    )


def main(options: Options, reference: str, query: str, lastz: str, keep: str | None) -> int:
    check_lastz(lastz)  # before any work
    engine = backends.select(options)
    inputs = read_inputs(options, reference, query)
    with tempfile.TemporaryDirectory(prefix="hspz-compare-") as tmp:
        t = Path(tmp)
        summary = drive_given(options, inputs, t / "out", engine)
        ours = sorted(b"".join(p.read_bytes() for p in (t / "out").glob("*.segments")).splitlines())
        write_fasta(t / "ref.fa", inputs.reference)
        write_fasta(t / "qry.fa", inputs.query)
        scores = None
        if options.scoring:  # the text hspZ scored with: a pipe (-c <(...)) is read only once
            scores = t / "scores.txt"
            scores.write_text(score_text(options.scoring))
        theirs = run_lastz(lastz, options, t / "ref.fa", t / "qry.fa", scores)
    name, only_o, only_t = verdict(ours, theirs)
    shared = len(ours) - len(only_o)
    print(f"compare: hspZ {len(ours)} lines, lastz {len(theirs)} lines, shared {shared}")
    print(f"compare: hspZ digest {summary.digest}")
    print(verdict_line(name, len(ours), len(theirs), len(only_o), len(only_t)))
    for tag, lines in (("only hspZ", only_o), ("only lastz", only_t)):
        for line in lines[:5]:
            print(f"  {tag}: {line.decode()}", file=sys.stdout)
    if keep:
        k = Path(keep)
        k.mkdir(parents=True, exist_ok=True)
        for name, lines in zip(KEPT, (ours, theirs), strict=True):
            durable.write_file(k / name, b"".join(x + b"\n" for x in lines), "--keep")
    return 0
