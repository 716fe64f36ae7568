#!/usr/bin/env bash
# Session 6's device calls 5 and 6, on nvidia-h200-x2: --gpus 1 against --gpus 2 on the simulated
# 1000 x 500 Mbp pair, -B 250M (4 reference bins x 2 query bins, 8 units), one pair of runs per
# call; call 5 generates the pair, call 6 (the same warm machine) reuses it.  The GPU tests first
# when TESTS=1.
#   run(kind="nvidia-h200-x2", carry=[".device"], command="TESTS=1 bash benchmarks/session6/call5.sh")
if [ "${TESTS:-0}" = 1 ]; then
  python3 -m compileall -q hspz > /dev/null
  HSPZ_EXAMPLES=$PWD/.device/data timeout 200 python3 -m pytest -q -p no:cacheprovider \
    tests/test_gpu.py > $OUT/tests.log 2>&1; tail -1 $OUT/tests.log
fi
REF_MBP=1000 QUERY_MBP=500 BIN=250M PYC=1 bash benchmarks/gpus_scaling.sh
