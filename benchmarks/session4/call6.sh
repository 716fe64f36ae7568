#!/usr/bin/env bash
# Session 4's device call 6: the GPU tests after the review commit (nothing else).
#   run(kind="nvidia-h200", carry=[".device"], command="bash benchmarks/session4/call6.sh")
export HSPZ_EXAMPLES=$PWD/.device/data
python3 -m compileall -q hspz > /dev/null
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py > $OUT/tests.log 2>&1
tail -3 $OUT/tests.log
