"""Frozen plans on disk: the manifest (`--dump-manifest` / `--from-manifest`), sealed by a
checksum of its content, and the checks a replay makes (the plan file and results files of the
workflow, built on these, are `hspz.formats.planfile`'s).

A manifest is line-oriented text, `key value` per line (`#` comments and blank lines ignored):
the format version and hspZ version, every parameter (the ones that decide output are checked on
replay, `gpus`/`threads`/`backend` are informational), the resolved 8x8 matrix, the resolved
`--max-hits`, sha256 digests of both inputs' records (`sequence.records_digest`), each record's
name and length, the bins and the units.  Its last line is `checksum sha256:<hex>`, the sha256
of every byte before that line: an edit or a flipped byte anywhere, a truncation or anything
appended is refused with one line naming the file, before a single value is believed.  Replay
then checks every record's name and length and both digests against the inputs, and each
explicit flag against the frozen value; it never replans.

The format has a version (FORMAT): another version is refused with one line, never read
half-way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from hspz import __version__
from hspz.core.errors import InputError, UsageError
from hspz.core.options import Options
from hspz.formats.sealed import Lines, int_at, sealed
from hspz.io.digests import side_digest
from hspz.io.records import Record
from hspz.planning.bins import Plan

FORMAT = 2  # 2: the checksum line

# Options fields a manifest freezes: each decides output, so replay compares them.
FROZEN = (
    "strand",
    "seed",
    "step",
    "transition",
    "xdrop",
    "hspthresh",
    "entropy",
    "ambiguous",
    "target_prefix",
    "query_prefix",
    "wga_chunk_size",
    "interval_size",
    "seq_block_size",
    "query_block_size",
    "max_hits",
    "kegalign_bins",
)
INFORMATIONAL = ("gpus", "threads", "backend")


@dataclass
class Manifest:
    """A frozen job: resolved options and matrix, input identities, record tables, the plan."""

    options: Options  # resolved: block sizes and max_hits as the plan used them
    matrix: np.ndarray  # int32 8x8
    plan: Plan
    ref_names: list[str]
    ref_lengths: list[int]
    qry_names: list[str]
    qry_lengths: list[int]
    ref_digest: str
    qry_digest: str
    requested: dict = field(default_factory=dict)  # -B / --query-block-size / -m as given
    version: str = __version__

    def to_text(self) -> str:
        """The manifest file: its lines and the checksum line."""
        return sealed("".join(f"{line}\n" for line in manifest_lines(self)))


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def _value(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


def _hex(text: str) -> str:
    return text.encode("utf-8").hex() or "-"


def manifest_lines(m: Manifest) -> list[str]:
    o = m.options
    lines = [f"hspz-manifest {FORMAT}", f"hspz_version {m.version}"]
    for name in FROZEN + INFORMATIONAL:
        v = getattr(o, name)
        if name in ("target_prefix", "query_prefix"):
            lines.append(f"{name}_hex {_hex(v)}")
        else:
            lines.append(f"{name} {_value(v)}")
    for name in ("seq_block_size", "query_block_size", "max_hits"):
        lines.append(f"requested_{name} {_value(m.requested.get(name, getattr(o, name)))}")
    lines.append(f"pattern {o.pattern}")
    lines.append("matrix " + ",".join(str(int(x)) for x in np.asarray(m.matrix).ravel()))
    for side, names, lengths, digest in (
        ("R", m.ref_names, m.ref_lengths, m.ref_digest),
        ("Q", m.qry_names, m.qry_lengths, m.qry_digest),
    ):
        lines.append(f"records {side} {len(names)} {digest}")
        lines += [
            f"record {side} {i} {n} {name}"
            for i, (name, n) in enumerate(zip(names, lengths, strict=True))
        ]
    lines += _bin_lines(m)
    return lines


def _bin_lines(m: Manifest) -> list[str]:
    p = m.plan
    lines = [f"bins R {len(p.ref_bins)}", f"bins Q {len(p.query_bins)}", f"units {len(p.units)}"]
    for side, bins, lengths in (
        ("R", p.ref_bins, m.ref_lengths),
        ("Q", p.query_bins, m.qry_lengths),
    ):
        for i, b in enumerate(bins):
            bp = sum(lengths[k] for k in b)
            lines.append(f"bin {side} {i} {bp} " + ",".join(str(k) for k in b))
    lines += [f"unit {u.ordinal} {u.ref_bin} {u.query_bin}" for u in p.units]
    return lines


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


def _option_value(lines: Lines, name: str, at: tuple[int, str]) -> Any:
    kind = {f.name: f.type for f in fields(Options)}[name]
    text = at[1]
    if name in ("target_prefix", "query_prefix"):
        return "" if text == "-" else bytes.fromhex(text).decode("utf-8")
    if text == "-":
        return None
    if "bool" in str(kind):
        if text not in ("0", "1"):
            raise lines.error(at[0], f"{name} must be 0 or 1")
        return text == "1"
    if "int" in str(kind):
        return int_at(lines, at, name)
    return text


def manifest_body(text: str, source: str) -> Manifest:
    """A Manifest from checked text without its checksum line (plan lines filtered out)."""
    lines = Lines(text, source)
    if [k for _, k, _ in lines.items[:1]] != ["hspz-manifest"]:
        raise InputError(f"{source}: not an hspZ manifest")
    keys = ["hspz-manifest", "hspz_version", "pattern", "matrix"]
    keys += [f"{n}_hex" if n.endswith("prefix") else n for n in FROZEN + INFORMATIONAL]
    keys += [f"requested_{n}" for n in ("seq_block_size", "query_block_size", "max_hits")]
    s = lines.scalars(keys)
    if int_at(lines, s["hspz-manifest"], "format version") != FORMAT:
        raise lines.error(s["hspz-manifest"][0], "unsupported manifest format version")
    values = {}
    for name in FROZEN + INFORMATIONAL:
        key = f"{name}_hex" if name.endswith("prefix") else name
        values[name] = _option_value(lines, name, s[key])
    requested = {
        n: _option_value(lines, n, s[f"requested_{n}"])
        for n in ("seq_block_size", "query_block_size", "max_hits")
    }
    options = Options(**values)
    if options.max_hits <= 0:
        raise lines.error(s["max_hits"][0], "max_hits must be the resolved cap, not 0")
    records = _records(lines)
    plan = _plan(lines, records)
    return Manifest(
        options,
        _matrix(lines, s["matrix"]),
        plan,
        *records["R"][:2],
        *records["Q"][:2],
        records["R"][2],
        records["Q"][2],
        requested,
        s["hspz_version"][1],
    )


def _matrix(lines: Lines, at: tuple[int, str]) -> np.ndarray:
    try:
        values = [int(x) for x in at[1].split(",")]
    except ValueError:
        values = []
    if len(values) != 64:
        raise lines.error(at[0], "matrix must be 64 comma-separated integers")
    return np.array(values, np.int32).reshape(8, 8)


def _records(lines: Lines) -> dict[str, tuple[list[str], list[int], str]]:
    out: dict[str, tuple[list[str], list[int], str]] = {}
    counts: dict[str, int] = {}
    for n, key, rest in lines.items:
        parts = rest.split(" ", 3)
        if key == "records" and len(parts) == 3 and parts[0] in ("R", "Q"):
            counts[parts[0]] = int(parts[1]) if parts[1].isdigit() else -1
            out[parts[0]] = ([], [], parts[2])
        elif key == "record":
            if (
                len(parts) != 4
                or parts[0] not in out
                or not parts[2].isdigit()
                or parts[1] != str(len(out[parts[0]][0]))
            ):
                raise lines.error(n, "malformed record line")
            out[parts[0]][0].append(parts[3])
            out[parts[0]][1].append(int(parts[2]))
    for side in ("R", "Q"):
        if side not in out or counts[side] != len(out[side][0]) or counts[side] == 0:
            raise InputError(f"{lines.source}: record table {side} is missing or incomplete")
    return out


def _plan(lines: Lines, records: dict) -> Plan:
    bins: dict[str, list[tuple[int, ...]]] = {"R": [], "Q": []}
    units = []
    for n, key, rest in lines.items:
        parts = rest.split(" ")
        try:
            if key == "bin":
                side, index, bp, members = parts
                ids = tuple(int(k) for k in members.split(","))
                if (
                    side not in bins
                    or int(index) != len(bins[side])
                    or int(bp) != sum(records[side][1][k] for k in ids)
                ):
                    raise ValueError
                bins[side].append(ids)
            elif key == "unit":
                units.append(tuple(int(x) for x in parts))
        except (ValueError, IndexError):
            raise lines.error(n, f"malformed {key} line") from None
    plan = Plan(tuple(bins["R"]), tuple(bins["Q"]))
    _check_topology(plan, units, records, lines.source)
    return plan


def _check_topology(plan: Plan, units: list, records: dict, source: str) -> None:
    expect = [(u.ordinal, u.ref_bin, u.query_bin) for u in plan.units]
    if units != expect or not plan.ref_bins or not plan.query_bins:
        raise InputError(f"{source}: units do not form the reference-outer R x Q grid")
    for side, bins in (("R", plan.ref_bins), ("Q", plan.query_bins)):
        members = sorted(k for b in bins for k in b)
        if members != list(range(len(records[side][0]))):
            raise InputError(f"{source}: {side} bins are not a partition of the records")


# --------------------------------------------------------------------------------------------
# Replay checks
# --------------------------------------------------------------------------------------------


def check_version(m: Manifest, source: str) -> None:
    if m.version != __version__:
        raise UsageError(
            f"{source}: made by hspZ {m.version}, this is hspZ {__version__}; "
            f"replay refuses a different version"
        )


def check_side(m: Manifest, side: str, records: Sequence[Record], source: str) -> None:
    """One side's records ("reference" or "query") against the frozen plan's, as
    `check_inputs` checks both."""
    names, lengths, want = (
        (m.ref_names, m.ref_lengths, m.ref_digest)
        if side == "reference"
        else (m.qry_names, m.qry_lengths, m.qry_digest)
    )
    _check_records(side, names, lengths, records, source)
    got = side_digest(records)
    if want != got:
        raise InputError(
            f"{source}: {side} records differ from the planned ones "
            f"(sha256 {got[:16]}… here, {want[:16]}… in the manifest)"
        )


def check_inputs(m: Manifest, ref: Sequence[Record], qry: Sequence[Record], source: str) -> None:
    """The records on this machine must be the records the plan was made from: the same
    names and lengths in the same order (the first one that differs is named), then the same
    bases (`sequence.records_digest`)."""
    for side, names, lengths, records in (
        ("reference", m.ref_names, m.ref_lengths, ref),
        ("query", m.qry_names, m.qry_lengths, qry),
    ):
        _check_records(side, names, lengths, records, source)
    for side, want, records in (("reference", m.ref_digest, ref), ("query", m.qry_digest, qry)):
        got = side_digest(records)
        if want != got:
            raise InputError(
                f"{source}: {side} records differ from the planned ones "
                f"(sha256 {got[:16]}… here, {want[:16]}… in the manifest)"
            )


def _check_records(
    side: str, names: list[str], lengths: list[int], records: Sequence[Record], source: str
) -> None:
    here = [(r.name, len(r)) for r in records]
    frozen = list(zip(names, lengths, strict=True))
    for i, (a, b) in enumerate(zip(here, frozen, strict=False)):
        if a != b:
            raise InputError(
                f"{source}: {side} record {i + 1} is {a[0]!r} ({a[1]} bp) here, "
                f"{b[0]!r} ({b[1]} bp) in the manifest"
            )
    if len(here) != len(frozen):
        raise InputError(
            f"{source}: the {side} has {len(here)} records here, {len(frozen)} in the manifest"
        )


def check_flags(
    m: Manifest, given: Options, explicit: Iterable[str], matrix: np.ndarray | None, source: str
) -> None:
    """Every flag given explicitly must agree with the frozen value (requested or resolved)."""
    for name in explicit:
        if name not in FROZEN:
            continue
        mine, frozen = getattr(given, name), getattr(m.options, name)
        allowed = {frozen, m.requested.get(name, frozen)}
        if name == "seed":  # a named seed and its pattern are the same seed
            allowed = {frozen, m.options.pattern} if given.pattern == m.options.pattern else set()
        if mine not in allowed:
            raise UsageError(
                f"{source}: {_flag(name)} ({_value(mine)}) differs from the "
                f"frozen value ({_value(frozen)}); replay never replans"
            )
    if matrix is not None and not np.array_equal(matrix, m.matrix):
        raise UsageError(
            f"{source}: the scoring matrix differs from the frozen one; replay never replans"
        )


def _flag(name: str) -> str:
    return {
        "interval_size": "--lastz-interval-size",
        "transition": "--notransition",
        "entropy": "--noentropy",
    }.get(name, "--" + name.replace("_", "-"))
