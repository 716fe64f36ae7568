#!/usr/bin/env bash
# Session 6's device call 4, on nvidia-h200: call1.sh (GPU tests, E. coli against session 5's code
# and lastz, simM both versions) after the host half became one vectorised call per group, then
# where the device's finish goes on simM (finish_phases.py).
#   run(kind="nvidia-h200", carry=[".device"], command="bash benchmarks/session6/call4.sh")
bash benchmarks/session6/call1.sh
PYTHONPATH=$PWD python3 benchmarks/finish_phases.py .device/data/simM_ref.2bit \
  .device/data/simM_query.2bit 2>&1 | tee $OUT/simm_phases.log
