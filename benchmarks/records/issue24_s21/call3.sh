#!/usr/bin/env bash
# Session 21, call 3 (the same warm machine as call 2): issue 24's ratio for 1643efa again, 5
# interleaved rounds; then the GPU tests on this tree.
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
python3 benchmarks/run.py mammal30x6 --arms cpu1 --sweep 1,16 --no-gpu --no-lastz --repeat 5 \
  --warmup none --workdir "$W" --json "$OUT/t24c.jsonl" > "$OUT/t24c.log" 2>&1
tail -7 "$OUT/t24c.log"
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py > "$OUT/tests.log" 2>&1
tail -2 "$OUT/tests.log"
