#!/usr/bin/env bash
# Session 20, call 7 (H200): the review mends (4af1d63): the GPU tests, then simM against the
# issue's starting code (d6fbc62, .device/alt) and LEAN on against off once more.
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/machine.txt"
git log --oneline -1 2>/dev/null | tee -a "$OUT/machine.txt"
STEPS='tests ab M' ROUNDS=3 PASSES=3 TESTS_TIMEOUT=260 M_TIMEOUT=150 VARIANTS='base,gpu.LEAN_HITS=0' \
  bash benchmarks/gpu_issue27.sh > "$OUT/driver1.log" 2>&1
grep -E "passed|failed|error" "$OUT/tests.log" | tail -3
tail -2 "$OUT/ab.log"
grep -v "^round\|^timeline\|^phases" "$OUT/variants_M.log" | tail -4
cd "$OUT" && tar -czf logs.tgz driver1.log variants_M.log && rm -f driver1.log variants_M.log ab_*.jsonl
