#!/usr/bin/env bash
# Session 7's device calls 1 and 2, on nvidia-h200-x2, from the repository root: why the same
# unit's GPU time varies from run to run (issue 4).  --gpus 1 and --gpus 2 on the simulated
# 1000 x 500 Mbp pair, -B 250M (4 reference bins x 2 query bins, 8 units), with every GPU's
# clocks, power, temperature, load and clock-event reasons sampled (SMI=1), the host's CPU too.
# ALT = .device/s6 (`git archive 46d2bfa hspz`: session 6's code, whose one in-process worker
# formats each unit's files before starting the next).  Call 1 generates the pair; call 2, on the
# same warm machine, reuses it:
#   run(kind="nvidia-h200-x2", carry=[".device"], command="bash benchmarks/session7/call1.sh")
#   run(kind="nvidia-h200-x2", carry=[".device"], command="ARMS='1 2 d1 2' bash benchmarks/session7/call1.sh")
REF_MBP=1000 QUERY_MBP=500 BIN=250M PYC=1 SMI=1 ALT=$PWD/.device/s6 ARMS=${ARMS:-2 1 alt1} \
  DEADLINE=${DEADLINE:-585} bash benchmarks/gpus_scaling.sh
