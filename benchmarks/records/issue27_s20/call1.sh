#!/usr/bin/env bash
# Session 20, call 1: the LEAN filter (gpu.LEAN_HITS: a hit's chunk tag looked up only once the
# filter keeps it, its seed slot divided by a multiply-high) against filter_seed16 on simM in one
# process, with Nsight Compute's count of each filter's instructions; the winner by more than
# 1.5% written into gpu.py (pick.py); on that tree the GPU tests and simM against the issue's
# starting code (d6fbc62, .device/alt).  .device/pick.py is benchmarks/records/issue27_s19/pick.py.
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/machine.txt"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "seed_filter" > "$OUT/lean_tests.log" 2>&1
echo "lean tests: $(tail -1 "$OUT/lean_tests.log")"
STEPS='M ncu' ROUNDS=4 PASSES=3 M_TIMEOUT=200 NCU_COUNT=1 VARIANTS='base,gpu.LEAN_HITS=1' \
  NCU_VARIANTS='base gpu.LEAN_HITS=1' bash benchmarks/gpu_issue27.sh > "$OUT/driver1.log" 2>&1
grep -v "^round\|^timeline\|^phases" "$OUT/variants_M.log" | tail -4
grep -E "=====|filter_seed|smsp__inst_executed.sum|Duration|Registers|Achieved Occupancy" "$OUT/ncu.txt" | head -24
python3 .device/pick.py "$OUT/variants_M.jsonl" 481cd48c670f8511 | tee "$OUT/pick.log"
grep -E "^(LEAN_HITS|AHEAD|HEAD|SEEDS_STAGED) = " hspz/engine/gpu.py | tee -a "$OUT/pick.log"
STEPS='tests ab' ROUNDS=3 TESTS_TIMEOUT=260 bash benchmarks/gpu_issue27.sh > "$OUT/driver2.log" 2>&1
grep -E "passed|failed|error" "$OUT/tests.log" | tail -3
tail -2 "$OUT/ab.log"
cd "$OUT" && tar -czf logs.tgz driver1.log driver2.log variants_M.log variants_M.jsonl ncu.txt ab.log lean_tests.log \
  && rm -f driver1.log driver2.log variants_M.log ncu.txt ab_*.jsonl
