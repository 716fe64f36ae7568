"""`hspZ merge`: replay every worker's results in ordinal order into the outputs, as `run`
writes them."""

from __future__ import annotations

from hspz.emit import Emitter
from hspz.errors import InputError
from hspz.execute import Summary, print_counts, say_removed
from hspz.inputs import table_lookup
from hspz.outdir import OutLock, Tree, check_disjoint


def merge_command(plan_path: str, outdir: str, tarball: str | None, diagonal: bool,
                  result_paths: list[str], wait: bool = False, command: str = "") -> int:
    """`hspZ merge`: replay every worker's results in ordinal order into the outputs.  Its
    outputs are checked against its inputs and OUT is locked before any result is read."""
    from hspz.manifest import read_plan, read_results

    pf = read_plan(plan_path)
    m = pf.manifest
    check_disjoint({"--plan": plan_path, "RESULT": result_paths,
                    "the reference of --plan": pf.reference, "the query of --plan": pf.query},
                   {"--tarball": tarball},
                   {"--output": Tree(outdir, writes=(tarball,) if tarball else ())})
    with OutLock(outdir, "--output", wait, command, keep_empty=tarball is None):
        emitter = Emitter(m.plan.units, table_lookup(m), outdir, tarball, diagonal)
        try:
            for path in result_paths:
                header, results = read_results(path)
                if header.get("plan") != pf.digest:
                    raise InputError(f"{path}: these results belong to another plan than "
                                     f"{plan_path}")
                for result in results:
                    emitter.add(result)
            digest = emitter.finish()
        except BaseException:
            emitter.abort()
            raise
        say_removed(emitter)
        summary = Summary(**emitter.counts, digest=digest)
        print_counts(summary)
        print(f"digest: {digest}")
    return 0
