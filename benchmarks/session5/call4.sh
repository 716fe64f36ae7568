#!/usr/bin/env bash
# Session 5's device call 4 (BENCHMARKS.md, "Session 5"), on nvidia-h200-x2, from the repository root:
#   run(kind="nvidia-h200-x2", carry=[".device"], command="bash benchmarks/session5/call4.sh")
# A second --gpus 1 / --gpus 2 pair of this code on call 3's 1000 x 500 Mbp workload (same seed).
export PYTHONPATH=$PWD
PYC=1 REF_MBP=1000 QUERY_MBP=500 BIN=250M TAG=big2_ bash benchmarks/gpus_scaling.sh
