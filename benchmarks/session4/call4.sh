#!/usr/bin/env bash
# Session 4's device call 4 (BENCHMARKS.md, "Session 4"), on nvidia-h200-x2, from the repository root:
#   run(kind="nvidia-h200-x2", carry=[".device"], command="bash benchmarks/session4/call4.sh")
# --gpus 1 vs --gpus 2 with the worker processes started before the inputs are read (workers.Pool),
# against session 3's code (.device/s3 = `git archive 9dcec21 hspz`) at --gpus 2, on 500 x 300 Mbp
# (session 3's workload), 2 rounds; then 500 x 500 Mbp, one round.  Every process with a bytecode
# cache (PYC=1).
set -uo pipefail
export PYC=1
QUERY_MBP=300 REPEAT=2 ALT=$PWD/.device/s3 TAG=q300_ bash benchmarks/gpus_scaling.sh
QUERY_MBP=500 REPEAT=1 TAG=q500_ bash benchmarks/gpus_scaling.sh
