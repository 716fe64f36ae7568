#!/usr/bin/env bash
# Session 6's device call 8, on nvidia-h200: the GPU tests at the session's last code.
#   run(kind="nvidia-h200", carry=[".device"], command="bash benchmarks/session6/call8.sh")
python3 -m compileall -q hspz > /dev/null
HSPZ_EXAMPLES=$PWD/.device/data timeout 170 python3 -m pytest -q -p no:cacheprovider \
  tests/test_gpu.py > $OUT/tests.log 2>&1
tail -3 $OUT/tests.log
