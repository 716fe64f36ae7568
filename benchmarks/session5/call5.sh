#!/usr/bin/env bash
# Session 5's device call 5, from the repository root:
#   run(kind="nvidia-h200", carry=[".device"], command="bash benchmarks/session5/call5.sh")
# The GPU tests after the review's kernel edit (filter_pass and first_pass share WALK_HIT).
export HSPZ_EXAMPLES=$PWD/.device/data PYTHONUNBUFFERED=1
python3 -m compileall -q hspz > /dev/null
timeout 170 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py 2>&1 | tee $OUT/tests.log | tail -3
