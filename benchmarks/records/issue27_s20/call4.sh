#!/usr/bin/env bash
# Session 20, call 4 (H200): the LEAN filter against filter_seed16 again, more rounds, on simM and
# on L100 (-B 250M), in one process each; then item 3's layouts and fit once more.
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/machine.txt"
STEPS='M L100' ROUNDS=5 PASSES=3 LROUNDS=3 M_TIMEOUT=220 VARIANTS='base,gpu.LEAN_HITS=1' \
  bash benchmarks/gpu_issue27.sh > "$OUT/driver1.log" 2>&1
grep -v "^round\|^timeline\|^phases" "$OUT/variants_M.log" | tail -4
grep -v "^round\|^timeline\|^phases" "$OUT/variants_L100.log" | tail -4
mkdir -p /tmp/p4 && rm -f /tmp/p4/*
OUT=/tmp/p4 STEPS="layouts fit" REPEAT=3 BUDGET=75 bash benchmarks/gpu_projection.sh > /tmp/p4/proj.log 2>&1
grep -E "^fit_wall_all.log:summary|^fit_wall_last.log:summary|^fit_wall_last.log:hg38" /tmp/p4/proj.log
tar -C /tmp -czf "$OUT/layouts.tgz" p4
cd "$OUT" && tar -czf logs.tgz driver1.log variants_M.log variants_M.jsonl variants_L100.log && rm -f driver1.log variants_M.log variants_L100.log
