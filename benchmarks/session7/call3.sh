#!/usr/bin/env bash
# Session 7's device calls 3 and 4, on nvidia-h200-x2, from the repository root, after the
# --max-hits walk moved to the device (plan.chunk_walks) and pieces grew to 1 << 28 hits: the GPU
# tests (TESTS=1), then --gpus 1 and --gpus 2 on the simulated 1000 x 500 Mbp pair, -B 250M, with
# the GPUs and the host sampled (SMI=1).  ALT = .device/s7a (the code of calls 1 and 2: session 6's
# engine with the in-process worker's results staged on a thread).  Call 3 generates the pair;
# call 4, on the same warm machine, reuses it:
#   run(kind="nvidia-h200-x2", carry=[".device"], command="TESTS=1 bash benchmarks/session7/call3.sh")
#   run(kind="nvidia-h200-x2", carry=[".device"], command="ARMS='1 2 alt1 2 1' bash benchmarks/session7/call3.sh")
# REF_MBP and QUERY_MBP (default 1000 and 500) pick another pair, e.g. 2000 x 1000 (32 units).
T0=$(date +%s)
if [ "${TESTS:-0}" = 1 ]; then
  python3 -m compileall -q hspz > /dev/null
  HSPZ_EXAMPLES=$PWD/.device/data timeout 200 python3 -m pytest -q -p no:cacheprovider \
    tests/test_gpu.py > $OUT/tests.log 2>&1; tail -1 $OUT/tests.log
fi
REF_MBP=${REF_MBP:-1000} QUERY_MBP=${QUERY_MBP:-500} BIN=250M PYC=1 SMI=1 ALT=$PWD/.device/s7a \
  ARMS=${ARMS:-2 1 2 1} \
  DEADLINE=$(( ${DEADLINE:-585} - $(date +%s) + T0 )) NEED1=${NEED1:-100} NEED2=${NEED2:-60} \
  bash benchmarks/gpus_scaling.sh
