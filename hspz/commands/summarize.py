"""`hspZ summarize`: the summary table of a query-list run (queries.tsv, names, the ledger, gapped
counts), as TSV and optionally HTML, by `tools.plots`."""

from __future__ import annotations

import argparse

from hspz.commands.checks import writable_file
from hspz.run import outdir
from hspz.tools import plots


def summarize_command(ns: argparse.Namespace) -> int:
    inputs = {
        "--queries": ns.queries,
        "--names": ns.names,
        "--ledger": ns.ledger,
        "a query of --queries": plots.listed_queries(ns.queries),
    }
    inputs.update({f"--gapped {p}": p for p in ns.gapped})
    outputs = {"--output": ns.output, **({"--html": ns.html} if ns.html else {})}
    outdir.check_disjoint(inputs, outputs)
    for flag, path in outputs.items():
        writable_file(flag, path, make_folders=True)
    plots.summarize(ns.queries, ns.names, ns.ledger, ns.output, ns.html, ns.gapped, ns.title)
    return 0
