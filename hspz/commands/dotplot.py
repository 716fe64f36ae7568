"""`hspZ dotplot`: a dot plot of one job's HSPs (and optionally their score distribution) from its
segments, drawn by `tools.plots`."""

from __future__ import annotations

import argparse
import os
import sys

from hspz.commands.checks import plan_inputs, plan_job, writable_file
from hspz.run import outdir
from hspz.tools import plots


def dotplot_command(ns: argparse.Namespace) -> int:
    pf, job = plan_job(ns)
    inputs = plan_inputs(ns, pf)
    outputs = {"--output": ns.output}
    if ns.names is not None:
        inputs["--names"] = ns.names
    if ns.distribution is not None:
        outputs["--distribution"] = ns.distribution
    outdir.check_disjoint(inputs, outputs)
    for flag, path in outputs.items():
        writable_file(flag, path, make_folders=True)
    m = job.manifest
    title = plots.job_title(job.name, job.path, ns.names)
    reference = os.path.basename(pf.reference or pf.index or "reference")
    texts = plots.segments_texts(ns.segments)
    n = plots.dotplot(
        texts,
        (m.ref_names, m.ref_lengths),
        (m.qry_names, m.qry_lengths),
        ns.output,
        title,
        (reference, os.path.basename(job.path)),
    )
    if ns.distribution is not None:
        plots.distribution(texts, ns.distribution, title)
    print(f"dotplot: {n} HSPs -> {', '.join(outputs.values())}", file=sys.stderr)
    return 0
