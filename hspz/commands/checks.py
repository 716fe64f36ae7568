"""What the report commands check before they read or write anything: an output file can be
written where its flag names it, and the plan file's job (`--job`) with every path it names."""

from __future__ import annotations

import argparse

from hspz.core.options import parse_int
from hspz.formats.planfile import PlanFile, PlanJob, read_plan
from hspz.run.outdir import check_output_file


def writable_file(flag: str, path: str | None, make_folders: bool = False) -> None:
    """A file an output flag names can be written there (checked before any work)."""
    if path is not None:
        check_output_file(flag, path, make_folders)


def plan_job(ns: argparse.Namespace) -> tuple[PlanFile, PlanJob]:
    """The plan file's job --job (1-based), for dotplot and gapped."""
    pf = read_plan(ns.plan)
    n = parse_int("--job", ns.job, 1, len(pf.jobs))
    return pf, pf.jobs[n - 1]


def plan_inputs(ns: argparse.Namespace, pf: PlanFile) -> dict:
    """What a report command reads or must never write: its plan, its segments and every input
    the plan names (the reference, every job's query)."""
    return {
        "--plan": ns.plan,
        "SEGMENTS": ns.segments,
        "the reference of --plan": pf.reference,
        "the index of --plan": pf.index,
        "a query of --plan": [j.path for j in pf.jobs],
    }
