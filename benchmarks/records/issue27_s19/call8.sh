#!/usr/bin/env bash
# Session 19, call 8: the fused prefix sum (gpu.SEEDS_SCAN) against CuPy's cumsum on simM, the
# winner by more than 1.5% written into gpu.py (pick.py); on that tree the GPU tests, simM and
# L100 against the issue's starting code (d6fbc62, .device/alt), then item 3's layouts.
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
STEPS='M' ROUNDS=3 PASSES=3 M_TIMEOUT=150 VARIANTS='base,gpu.SEEDS_SCAN=0,gpu.HEAD=32' \
  bash benchmarks/gpu_issue27.sh > "$OUT/driver1.log" 2>&1
grep -v "^round\|^timeline\|^phases" "$OUT/variants_M.log" | tail -5
python3 .device/pick.py "$OUT/variants_M.jsonl" 481cd48c670f8511 | tee "$OUT/pick.log"
grep -E "^(AHEAD|HEAD|SEEDS_STAGED|SEEDS_SCAN|PRIORITY) = " hspz/engine/gpu.py | tee -a "$OUT/pick.log"
STEPS='tests ab abL' ROUNDS=3 LROUNDS=2 TESTS_TIMEOUT=260 bash benchmarks/gpu_issue27.sh > "$OUT/driver2.log" 2>&1
grep -E "passed|failed|error" "$OUT/tests.log" | tail -5
tail -2 "$OUT/ab.log"; cat "$OUT/abL.log"
mkdir -p /tmp/p8 && rm -f /tmp/p8/*
OUT=/tmp/p8 STEPS="layouts fit" REPEAT=3 BUDGET=75 bash benchmarks/gpu_projection.sh > /tmp/p8/proj.log 2>&1
grep -E "round|^fit_wall_all.log:summary|^fit_wall_last.log:summary|^fit_wall_last.log:hg38" /tmp/p8/proj.log
cd "$OUT" && tar -C /tmp -czf layouts.tgz p8 && tar -czf logs.tgz driver1.log driver2.log variants_M.log ab.log \
  && rm -f driver1.log driver2.log variants_M.log ab_*.jsonl
