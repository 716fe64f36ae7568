#!/usr/bin/env bash
# Session 19, call 1: GPU tests on the trial tree (staged query_seeds, a small first group, the
# review's mends), the variants on simM with a timeline, then simM and L100 against the issue's
# starting code (d6fbc62, .device/alt).  L100 is generated in the background from the start.
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
STEPS='tests M ab abL' ROUNDS=3 PASSES=3 LROUNDS=2 TESTS_TIMEOUT=240 M_TIMEOUT=150 \
  VARIANTS='base,gpu.SEEDS_STAGED=0,gpu.HEAD=1,gpu.SEEDS_STAGED=0+gpu.HEAD=1,gpu.GROUP_BASES=8388608,gpu.GROUP_BASES=33554432,gpu.PIECE=134217728' \
  bash benchmarks/gpu_issue27.sh > "$OUT/driver1.log" 2>&1
grep -E "passed|failed|error" "$OUT/tests.log" | tail -5
grep -v "^round\|^timeline" "$OUT/variants_M.log" | grep -v "^phases" | tail -16
tail -3 "$OUT/ab.log"; cat "$OUT/abL.log"; tail -3 /tmp/l100.err
