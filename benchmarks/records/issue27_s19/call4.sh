#!/usr/bin/env bash
# Session 19, call 4: the pipeline's variants on simM (base: AHEAD 1, EVEN_PIECES, FINISH_LATE,
# staged query_seeds, HEAD 8), the winner by more than 1.5% written into gpu.py (pick.py), then
# the GPU tests and simM against the issue's starting code on that tree.
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
STEPS='M' ROUNDS=3 PASSES=3 M_TIMEOUT=200 \
  VARIANTS='base,gpu.FINISH_LATE=0,gpu.EVEN_PIECES=0,gpu.FINISH_LATE=0+gpu.EVEN_PIECES=0,gpu.AHEAD=2,gpu.AHEAD=2+gpu.FINISH_LATE=0' \
  bash benchmarks/gpu_issue27.sh > "$OUT/driver1.log" 2>&1
grep -v "^round\|^timeline\|^phases" "$OUT/variants_M.log" | tail -14
python3 .device/pick.py "$OUT/variants_M.jsonl" | tee "$OUT/pick.log"
grep -E "^(AHEAD|EVEN_PIECES|FINISH_LATE|HEAD|SEEDS_STAGED|PRIORITY) = " hspz/engine/gpu.py | tee -a "$OUT/pick.log"
STEPS='tests ab' ROUNDS=3 TESTS_TIMEOUT=300 bash benchmarks/gpu_issue27.sh > "$OUT/driver2.log" 2>&1
grep -E "passed|failed|error" "$OUT/tests.log" | tail -5
tail -3 "$OUT/ab.log"
cd "$OUT" && tar -czf logs.tgz driver1.log driver2.log variants_M.log tests.log ab.log && rm -f driver1.log driver2.log variants_M.log ab_*.jsonl
