"""`hspZ plan`: freeze the plan and the schedule for --gpus workers into one plan file."""

from __future__ import annotations

import os
import sys

from hspz.budget import devices_for
from hspz.commands import Request
from hspz.freeze import load_manifest, prepare, schedule_for, write_dumps
from hspz.inputs import read_both


def plan_command(req: Request, select) -> int:
    """`hspZ plan`: freeze the plan and the schedule for --gpus workers into one file."""
    from hspz.manifest import plan_text, write_text

    ref, qry = read_both(req.reference, req.query)
    loaded = load_manifest(req, ref, qry)
    devices = devices_for(select(), req.options.gpus)
    m = prepare(req, devices, ref, qry, True, loaded)
    write_dumps(req, m)
    sched = schedule_for(m, req.options.gpus, devices)
    text = plan_text(m, sched, os.path.abspath(req.reference), os.path.abspath(req.query))
    write_text(req.output, text)
    print(f"plan: {len(m.plan.ref_bins)} reference bins, {len(m.plan.query_bins)} query bins, "
          f"{len(m.plan.units)} units, {sched.workers} workers -> {req.output}",
          file=sys.stderr)
    return 0
