#!/usr/bin/env bash
# Session 20, call 8 (H200): the GPU tests on the last GPU edit (nib_filter's LEAN flag without its alias).
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
grep -n "if (LEAN" hspz/engine/kernels/extend.cu | head -3
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py > "$OUT/tests.log" 2>&1
tail -3 "$OUT/tests.log"
