#!/usr/bin/env bash
# Session 20, call 2 (H200): L100 against the issue's starting code (abL), then item 2 (hspZ warm
# into a fresh cache, then two cold runs of simM).
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/machine.txt"
STEPS='abL' LROUNDS=2 bash benchmarks/gpu_issue27.sh > "$OUT/driver1.log" 2>&1
cat "$OUT/abL.log"
STEPS='compile' WARM=1 bash benchmarks/gpu_issue27.sh > "$OUT/driver2.log" 2>&1
cat "$OUT/compile.log" | grep -v "^time: workers:" | tail -40
