#!/usr/bin/env bash
# Session 20, call 5 (H200): LEAN_HITS on by default: the GPU tests, then simM and L100 against the
# issue's starting code (d6fbc62, .device/alt).
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/machine.txt"
grep -E "^(LEAN_HITS|AHEAD|HEAD|SEEDS_STAGED) = " hspz/engine/gpu.py
STEPS='tests ab abL' ROUNDS=3 LROUNDS=2 TESTS_TIMEOUT=260 bash benchmarks/gpu_issue27.sh > "$OUT/driver1.log" 2>&1
grep -E "passed|failed|error" "$OUT/tests.log" | tail -3
tail -2 "$OUT/ab.log"; cat "$OUT/abL.log"
