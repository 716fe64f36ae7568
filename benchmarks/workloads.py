"""Named benchmark workloads: reading `benchmarks/workloads.toml` and materialising them.

Owns `load_workloads`, `workload_spec`, `materialise` and a small CLI
(`python benchmarks/workloads.py --list`, `python benchmarks/workloads.py NAME --workdir DIR`).
Real workloads point at files (found by file name in a `files` folder instead, where given:
the device has no Debian packages, so their files travel in a carried folder); simulated ones are
generated with `benchmarks.simulate` on demand (2bit pairs by `write_pair_2bit`, in forked
processes) and cached in the work folder under names carrying a hash of their spec (the
reference's hash covers only the fields it depends on, so `M` and `batch` share one reference
file).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import sys
import tomllib
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.simulate import (  # noqa: E402
    PairSpec,
    Records,
    simulate_pair,
    simulate_queries,
    spec_digest,
    write_pair_2bit,
    write_records,
)

DEFAULT_PATH = Path(__file__).with_name("workloads.toml")
KINDS = ("real", "simulated", "batch")
_META = {
    "kind",
    "description",
    "format",
    "queries",
    "reference_of",
    "reference",
    "query",
    "package",
}


def load_workloads(path: str | Path = DEFAULT_PATH) -> dict[str, dict[str, Any]]:
    """Workloads by name; simulated and batch entries have [simulated_defaults] merged in."""
    with open(path, "rb") as fh:
        data = tomllib.load(fh)
    defaults = data.get("simulated_defaults", {})
    out: dict[str, dict[str, Any]] = {}
    for name, entry in data.get("workloads", {}).items():
        kind = entry.get("kind")
        if kind not in KINDS:
            raise ValueError(f"workload {name!r}: kind must be one of {KINDS}, not {kind!r}")
        out[name] = {**defaults, **entry} if kind != "real" else dict(entry)
    for name, entry in out.items():
        source = out.get(entry.get("reference_of"), {})
        if entry["kind"] == "batch" and source.get("kind") != "simulated":
            raise ValueError(f"workload {name!r}: reference_of must name a simulated workload")
    return out


def _spec_fields(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in _META}


def workload_spec(workloads: dict[str, dict[str, Any]], name: str) -> PairSpec:
    """The PairSpec of a simulated workload (for a batch: its first query's)."""
    entry = workloads[name]
    if entry["kind"] == "simulated":
        return PairSpec(**_spec_fields(entry))
    if entry["kind"] == "batch":
        base = _spec_fields(workloads[entry["reference_of"]])
        return PairSpec(**{**base, **_spec_fields(entry), "query_seed": 1})
    raise ValueError(f"workload {name!r} is not simulated")


def _write(path: Path, records: Records, fmt: str) -> Path:
    if not path.exists():
        write_records(path, records, fmt)
    return path


def materialise(
    name: str, workdir: str | Path, path: str | Path = DEFAULT_PATH, files: str | Path | None = None
) -> dict[str, Path]:
    """Files of workload `name`: {"reference", "query"} or, for a batch, {"reference",
    "query_list"} (a text file with one query path a line).  Simulated files are generated in
    `workdir` when missing and reused when present; a real workload's files are looked up by
    their file name in `files` when that is given."""
    workloads = load_workloads(path)
    if name not in workloads:
        raise KeyError(f"no workload {name!r}; known: {', '.join(workloads)}")
    entry = workloads[name]
    if entry["kind"] == "real":
        return _real(name, entry, files)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    spec = workload_spec(workloads, name)
    ref_fmt = workloads[entry.get("reference_of", name)].get("format", "fa")
    ref_path = workdir / f"ref-{spec_digest(spec, reference_only=True)}.{ref_fmt}"
    fmt = entry.get("format", "fa")
    if entry["kind"] == "simulated":
        query_path = workdir / f"query-{spec_digest(spec)}.{fmt}"
        if not (ref_path.exists() and query_path.exists()):
            _simulate(spec, ref_path, ref_fmt, query_path, fmt)
        return {"reference": ref_path, "query": query_path}
    return _batch(entry, spec, ref_path, ref_fmt, workdir, fmt)


def _simulate(spec: PairSpec, ref_path: Path, ref_fmt: str, query_path: Path, fmt: str) -> None:
    if ref_fmt == fmt == "2bit":  # the same bytes as simulate_pair + write_records, sooner
        tmp_ref, tmp_query = (p.with_name(p.name + ".part") for p in (ref_path, query_path))
        write_pair_2bit(spec, tmp_ref, tmp_query)
        tmp_ref.replace(ref_path)
        tmp_query.replace(query_path)
        return
    ref, query = simulate_pair(spec)
    _write(ref_path, ref, ref_fmt)
    _write(query_path, query, fmt)


def _real(name: str, entry: dict[str, Any], files: str | Path | None) -> dict[str, Path]:
    paths = {"reference": Path(entry["reference"]), "query": Path(entry["query"])}
    if files is not None:
        paths = {k: Path(files) / p.name for k, p in paths.items()}
    for p in paths.values():
        if not p.exists():
            package = entry.get("package", "?")
            raise FileNotFoundError(f"workload {name!r}: {p} is missing (Debian package {package})")
    return paths


def _batch(
    entry, spec: PairSpec, ref_path: Path, ref_fmt: str, workdir: Path, fmt: str
) -> dict[str, Path]:
    seeds = list(range(1, int(entry["queries"]) + 1))
    specs = [dataclasses.replace(spec, query_seed=s) for s in seeds]
    query_paths = [workdir / f"query-{spec_digest(s)}.{fmt}" for s in specs]
    if not ref_path.exists() or not all(p.exists() for p in query_paths):
        ref, queries = simulate_queries(spec, seeds)
        _write(ref_path, ref, ref_fmt)
        for p, records in zip(query_paths, queries, strict=True):
            _write(p, records, fmt)
    listing = "".join(f"{p}\n" for p in query_paths)
    list_path = workdir / f"batch-{hashlib.sha256(listing.encode()).hexdigest()[:16]}.txt"
    if not list_path.exists():
        list_path.write_text(listing)
    return {"reference": ref_path, "query_list": list_path}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", nargs="?", help="workload to materialise")
    parser.add_argument("--workdir", type=Path, default=Path("bench-data"))
    parser.add_argument("--workloads", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--files", type=Path, help="folder holding the real workloads' files")
    parser.add_argument("--list", action="store_true", help="list the workloads")
    args = parser.parse_args(argv)
    if args.list or not args.name:
        for name, entry in load_workloads(args.workloads).items():
            print(f"{name}\t{entry['kind']}\t{entry.get('description', '')}")
        return 0
    for key, value in materialise(args.name, args.workdir, args.workloads, args.files).items():
        print(f"{key}\t{value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
