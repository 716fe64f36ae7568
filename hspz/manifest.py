"""Frozen plans on disk: the manifest (`--dump-manifest` / `--from-manifest`), the plan file of
`hspZ plan` and the results file of `hspZ work`.

A manifest is line-oriented text, `key value` per line (`#` comments and blank lines ignored):
the format version and hspZ version, every parameter (the ones that decide output are checked on
replay, `gpus`/`threads`/`backend` are informational), the resolved 8x8 matrix, the resolved
`--max-hits`, sha256 digests of both inputs' records (`sequence.records_digest`), each record's
name and length, the bins and the units.  Replay validates and fails with one line on any
mismatch; it never replans.

A plan file is a manifest followed by the schedule for W workers and the absolute input paths.
A results file is an .npz of `UnitResult.to_bytes()` images plus a JSON header naming the plan
(sha256 of the plan file's text) and the worker, written to a temporary name and renamed.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np

from hspz import __version__
from hspz.engine import UnitResult
from hspz.errors import InputError, UsageError
from hspz.options import Options
from hspz.plan import Plan
from hspz.schedule import Schedule, Visit, schedule_lines

FORMAT = 1
PLAN_FORMAT = 1
RESULTS_FORMAT = 2  # 2: HSP scores are int64 (hsp.HSP_DTYPE)

# Options fields a manifest freezes: each decides output, so replay compares them.
FROZEN = ("strand", "seed", "step", "transition", "xdrop", "hspthresh", "entropy", "ambiguous",
          "target_prefix", "query_prefix", "wga_chunk_size", "interval_size",
          "seq_block_size", "query_block_size", "max_hits", "kegalign_bins")
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
        return "".join(f"{line}\n" for line in manifest_lines(self))


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def _value(v) -> str:
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
    for side, names, lengths, digest in (("R", m.ref_names, m.ref_lengths, m.ref_digest),
                                         ("Q", m.qry_names, m.qry_lengths, m.qry_digest)):
        lines.append(f"records {side} {len(names)} {digest}")
        lines += [f"record {side} {i} {n} {name}" for i, (name, n) in
                  enumerate(zip(names, lengths, strict=True))]
    lines += _bin_lines(m)
    return lines


def _bin_lines(m: Manifest) -> list[str]:
    p = m.plan
    lines = [f"bins R {len(p.ref_bins)}", f"bins Q {len(p.query_bins)}",
             f"units {len(p.units)}"]
    for side, bins, lengths in (("R", p.ref_bins, m.ref_lengths),
                                ("Q", p.query_bins, m.qry_lengths)):
        for i, b in enumerate(bins):
            bp = sum(lengths[k] for k in b)
            lines.append(f"bin {side} {i} {bp} " + ",".join(str(k) for k in b))
    lines += [f"unit {u.ordinal} {u.ref_bin} {u.query_bin}" for u in p.units]
    return lines


@contextmanager
def replaced_atomically(path: str | os.PathLike, flag: str = "") -> Iterator[Path]:
    """A temporary name beside `path` to write; synced and renamed onto `path` when the block
    succeeds, removed when it fails (SIGTERM, `errors.Terminated`, included), so `path` holds
    the old bytes or the complete new ones, never a part.  The temporary name is hidden and
    unique across hosts and PID namespaces (a SIGKILL may leave it).  An OSError becomes one
    UsageError line (`flag` first)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.partial-{uuid.uuid4().hex}")
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise UsageError(f"{flag}cannot write {path}: {exc.strerror or exc}") from exc
        raise


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write to a temporary name beside `path`, then rename it into place."""
    with replaced_atomically(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


class _Lines:
    """`key rest` pairs of a text file, with line numbers for error messages."""

    def __init__(self, text: str, source: str):
        self.source = source
        self.items: list[tuple[int, str, str]] = []
        for n, raw in enumerate(text.split("\n"), 1):
            if not raw.strip() or raw.startswith("#"):
                continue
            key, _, rest = raw.partition(" ")
            self.items.append((n, key, rest))

    def error(self, n: int, what: str) -> InputError:
        return InputError(f"{self.source} line {n}: {what}")

    def scalars(self, keys: Iterable[str]) -> dict[str, tuple[int, str]]:
        wanted, out = set(keys), {}
        for n, key, rest in self.items:
            if key in wanted:
                if key in out:
                    raise self.error(n, f"duplicate {key}")
                out[key] = (n, rest)
        missing = [k for k in keys if k not in out]
        if missing:
            raise InputError(f"{self.source}: not a complete hspZ manifest (missing {missing[0]})")
        return out


def _int(lines: _Lines, at: tuple[int, str], name: str) -> int:
    try:
        return int(at[1])
    except ValueError:
        raise lines.error(at[0], f"bad {name} {at[1]!r}") from None


def _option_value(lines: _Lines, name: str, at: tuple[int, str]):
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
        return _int(lines, at, name)
    return text


def parse_manifest(text: str, source: str) -> Manifest:
    """A Manifest from text (a manifest or a plan file); InputError names the line."""
    lines = _Lines(text, source)
    head = [k for _, k, _ in lines.items[:1]]
    if head not in (["hspz-manifest"], ["hspz-plan"]):
        raise InputError(f"{source}: not an hspZ manifest")
    keys = ["hspz-manifest", "hspz_version", "pattern", "matrix"]
    keys += [f"{n}_hex" if n.endswith("prefix") else n for n in FROZEN + INFORMATIONAL]
    keys += [f"requested_{n}" for n in ("seq_block_size", "query_block_size", "max_hits")]
    s = lines.scalars(keys)
    if _int(lines, s["hspz-manifest"], "format version") != FORMAT:
        raise lines.error(s["hspz-manifest"][0], "unsupported manifest format version")
    values = {}
    for name in FROZEN + INFORMATIONAL:
        key = f"{name}_hex" if name.endswith("prefix") else name
        values[name] = _option_value(lines, name, s[key])
    requested = {n: _option_value(lines, n, s[f"requested_{n}"])
                 for n in ("seq_block_size", "query_block_size", "max_hits")}
    options = Options(**values)
    if options.max_hits <= 0:
        raise lines.error(s["max_hits"][0], "max_hits must be the resolved cap, not 0")
    records = _records(lines)
    plan = _plan(lines, records)
    return Manifest(options, _matrix(lines, s["matrix"]), plan, *records["R"][:2],
                    *records["Q"][:2], records["R"][2], records["Q"][2], requested,
                    s["hspz_version"][1])


def _matrix(lines: _Lines, at: tuple[int, str]) -> np.ndarray:
    try:
        values = [int(x) for x in at[1].split(",")]
    except ValueError:
        values = []
    if len(values) != 64:
        raise lines.error(at[0], "matrix must be 64 comma-separated integers")
    return np.array(values, np.int32).reshape(8, 8)


def _records(lines: _Lines) -> dict[str, tuple[list[str], list[int], str]]:
    out: dict[str, tuple[list[str], list[int], str]] = {}
    counts: dict[str, int] = {}
    for n, key, rest in lines.items:
        parts = rest.split(" ", 3)
        if key == "records" and len(parts) == 3 and parts[0] in ("R", "Q"):
            counts[parts[0]] = int(parts[1]) if parts[1].isdigit() else -1
            out[parts[0]] = ([], [], parts[2])
        elif key == "record":
            if len(parts) != 4 or parts[0] not in out or not parts[2].isdigit() \
                    or parts[1] != str(len(out[parts[0]][0])):
                raise lines.error(n, "malformed record line")
            out[parts[0]][0].append(parts[3])
            out[parts[0]][1].append(int(parts[2]))
    for side in ("R", "Q"):
        if side not in out or counts[side] != len(out[side][0]) or counts[side] == 0:
            raise InputError(f"{lines.source}: record table {side} is missing or incomplete")
    return out


def _plan(lines: _Lines, records: dict) -> Plan:
    bins: dict[str, list[tuple[int, ...]]] = {"R": [], "Q": []}
    units = []
    for n, key, rest in lines.items:
        parts = rest.split(" ")
        try:
            if key == "bin":
                side, index, bp, members = parts
                ids = tuple(int(k) for k in members.split(","))
                if side not in bins or int(index) != len(bins[side]) or \
                        int(bp) != sum(records[side][1][k] for k in ids):
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


def read_manifest(path: str | os.PathLike) -> Manifest:
    return parse_manifest(_read(path), os.fspath(path))


def _read(path: str | os.PathLike) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {os.fspath(path)}: "
                         f"{getattr(exc, 'strerror', None) or exc}") from exc


# --------------------------------------------------------------------------------------------
# Replay checks
# --------------------------------------------------------------------------------------------


def check_version(m: Manifest, source: str) -> None:
    if m.version != __version__:
        raise UsageError(f"{source}: made by hspZ {m.version}, this is hspZ {__version__}; "
                         f"replay refuses a different version")


def check_inputs(m: Manifest, ref_digest: str, qry_digest: str, source: str) -> None:
    """The records on this machine must be the records the plan was made from."""
    for side, want, got in (("reference", m.ref_digest, ref_digest),
                            ("query", m.qry_digest, qry_digest)):
        if want != got:
            raise InputError(f"{source}: {side} records differ from the planned ones "
                             f"(sha256 {got[:16]}… here, {want[:16]}… in the manifest)")


def check_flags(m: Manifest, given: Options, explicit: Iterable[str], matrix: np.ndarray | None,
                source: str) -> None:
    """Every flag given explicitly must agree with the frozen value (requested or resolved)."""
    for name in explicit:
        if name not in FROZEN:
            continue
        mine, frozen = getattr(given, name), getattr(m.options, name)
        allowed = {frozen, m.requested.get(name, frozen)}
        if name == "seed":  # a named seed and its pattern are the same seed
            allowed = {frozen, m.options.pattern} if given.pattern == m.options.pattern else set()
        if mine not in allowed:
            raise UsageError(f"{source}: {_flag(name)} ({_value(mine)}) differs from the "
                             f"frozen value ({_value(frozen)}); replay never replans")
    if matrix is not None and not np.array_equal(matrix, m.matrix):
        raise UsageError(f"{source}: the scoring matrix differs from the frozen one; replay "
                         f"never replans")


def _flag(name: str) -> str:
    return {"interval_size": "--lastz-interval-size", "transition": "--notransition",
            "entropy": "--noentropy"}.get(name, "--" + name.replace("_", "-"))


# --------------------------------------------------------------------------------------------
# Plan files (hspZ plan -> work -> merge)
# --------------------------------------------------------------------------------------------


@dataclass
class PlanFile:
    manifest: Manifest
    schedule: Schedule
    reference: str
    query: str
    digest: str = ""  # sha256 of the file's text


def plan_text(manifest: Manifest, schedule: Schedule, reference: str, query: str) -> str:
    for path in (reference, query):
        if "\n" in path:
            raise UsageError(f"input path {path!r} contains a newline")
    lines = [f"hspz-plan {PLAN_FORMAT}", f"reference_path {reference}", f"query_path {query}",
             f"workers {schedule.workers}", f"policy {schedule.policy}",
             f"reason {schedule.reason}"]
    for k, visits in enumerate(schedule.visits):
        lines.append(f"worker {k} {schedule.devices[k]} {schedule.labels[k]}")
        lines += [f"visit {k} {v.ref_bin} {v.first} {v.end}" for v in visits]
    lines += schedule_lines(schedule)  # the same lines `hspZ plan` prints, for readers
    return "".join(f"{line}\n" for line in lines) + manifest.to_text()


def read_plan(path: str | os.PathLike) -> PlanFile:
    source = os.fspath(path)
    text = _read(path)
    lines = _Lines(text, source)
    if [k for _, k, _ in lines.items[:1]] != ["hspz-plan"]:
        raise InputError(f"{source}: not an hspZ plan file (made by `hspZ plan`)")
    s = lines.scalars(["hspz-plan", "reference_path", "query_path", "workers", "policy",
                       "reason"])
    if _int(lines, s["hspz-plan"], "format version") != PLAN_FORMAT:
        raise lines.error(s["hspz-plan"][0], "unsupported plan format version")
    body = "\n".join(raw for raw in text.split("\n") if not _is_plan_key(raw))
    manifest = parse_manifest(body, source)
    schedule = _schedule(lines, _int(lines, s["workers"], "workers"), s, manifest)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return PlanFile(manifest, schedule, s["reference_path"][1], s["query_path"][1], digest)


_PLAN_KEYS = ("hspz-plan", "reference_path", "query_path", "workers", "policy", "reason",
              "worker", "visit", "schedule:")


def _is_plan_key(raw: str) -> bool:
    return raw.partition(" ")[0] in _PLAN_KEYS


def _schedule(lines: _Lines, workers: int, s: dict, m: Manifest) -> Schedule:
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
    _check_cover(visits, m.plan, lines.source)
    return Schedule(s["policy"][1], s["reason"][1], visits, devices, labels,
                    len(m.plan.ref_bins))


def _check_cover(visits: list[list[Visit]], plan: Plan, source: str) -> None:
    q = len(plan.query_bins)
    ordinals = sorted(v.ref_bin * q + k for vs in visits for v in vs for k in range(v.first,
                                                                                    v.end))
    if not visits or ordinals != list(range(len(plan.units))):
        raise InputError(f"{source}: the schedule does not cover every unit exactly once")


# --------------------------------------------------------------------------------------------
# Results files (hspZ work -> merge)
# --------------------------------------------------------------------------------------------


def write_results(path: str | os.PathLike, results: Sequence[UnitResult], header: dict) -> None:
    """All of one worker's UnitResults in one .npz, written under a temporary name."""
    arrays = {f"unit{r.ordinal}": np.frombuffer(r.to_bytes(), np.uint8) for r in results}
    head = dict(header, format=RESULTS_FORMAT, units=[r.ordinal for r in results])
    arrays["header"] = np.frombuffer(json.dumps(head).encode(), np.uint8)
    with replaced_atomically(path, "--output: ") as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **arrays)


def read_results(path: str | os.PathLike) -> tuple[dict, list[UnitResult]]:
    """(header, UnitResults) of one results file; InputError when it is not one."""
    source = os.fspath(path)
    try:
        with np.load(source, allow_pickle=False) as z:
            header = json.loads(z["header"].tobytes().decode())
            keys = [f"unit{o}" for o in header["units"]]
            results = [UnitResult.from_file(io.BytesIO(z[k].tobytes())) for k in keys]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{source}: not an hspZ results file ({exc})") from exc
    if header.get("format") != RESULTS_FORMAT:
        raise InputError(f"{source}: unsupported results format {header.get('format')!r}")
    return header, results
