"""`hspZ gapped`: one job's gapped stage through LASTZ (`tools.gapped`) in its three steps: the
reference as 2bit, the segments files split into groups, and a group extended."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hspz.commands.checks import plan_inputs, plan_job, writable_file
from hspz.core.errors import UsageError
from hspz.core.options import parse_int
from hspz.run import outdir
from hspz.tools import gapped


def gapped_command(ns: argparse.Namespace) -> int:
    pf, job = plan_job(ns)
    reference = pf.reference
    if reference is None:
        raise UsageError(
            f"{ns.plan}: planned from an index without --reference: the gapped "
            f"stage needs the reference's bases"
        )
    gapped.check_format(ns.format)
    inputs = plan_inputs(ns, pf)
    for flag, value in (("--groups", ns.groups), ("--reference-2bit", ns.reference_2bit)):
        if value is not None:
            inputs[flag] = value
    outdir.check_disjoint(inputs, {"--output": ns.output})
    writable_file("--output", ns.output, make_folders=True)
    Path(ns.output).parent.mkdir(parents=True, exist_ok=True)
    if ns.stage == "reference":
        gapped.write_reference(job.manifest, reference, ns.output)
        print(f"gapped: the reference as 2bit -> {ns.output}", file=sys.stderr)
        return 0
    if ns.segments is None:
        raise UsageError(f"SEGMENTS: --stage {ns.stage} needs the job's segments folder")
    if not Path(ns.segments).is_dir():
        raise UsageError(f"SEGMENTS: {ns.segments} is not a folder of segments files")
    segments = Path(ns.segments)
    files = gapped.job_files(job.manifest, segments)
    if ns.stage == "split":
        bound = parse_int("--group-bytes", ns.group_bytes, 1, 2**62)
        groups = gapped.split_groups([(f, (segments / f).stat().st_size) for f in files], bound)
        gapped.write_groups(ns.output, groups)
        print(
            f"gapped: {len(files)} segments file(s) in {len(groups)} group(s) -> {ns.output}",
            file=sys.stderr,
        )
        return 0
    first, chosen = True, files
    if ns.stage == "extend":
        if ns.groups is None:
            raise UsageError("--stage extend needs --groups (the file --stage split wrote)")
        groups = gapped.read_groups(ns.groups)
        g = parse_int("--group", ns.group, 0, len(groups) - 1)
        chosen, first = groups[g], g == 0
        if [f for group in groups for f in group] != files:
            raise UsageError(
                f"--groups: {ns.groups} does not list the files of SEGMENTS in "
                f"emission order (a rerun of --stage split makes it anew)"
            )
    n = gapped.extend_group(
        job.manifest,
        reference,
        job.path,
        segments,
        chosen,
        first,
        ns.output,
        ns.lastz,
        ns.format,
        ns.lastz_flags,
        ns.reference_2bit,
    )
    print(f"gapped: {n} segments file(s) extended by {ns.lastz} -> {ns.output}", file=sys.stderr)
    return 0
