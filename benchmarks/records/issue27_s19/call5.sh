#!/usr/bin/env bash
# Session 19, call 5: L100 against the issue's starting code (abL), then item 3's layouts (three
# rounds) and fits, on the tree call 4 kept.
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
grep -E "^(AHEAD|EVEN_PIECES|FINISH_LATE|HEAD|SEEDS_STAGED|PRIORITY) = " hspz/engine/gpu.py
STEPS='abL' LROUNDS=2 bash benchmarks/gpu_issue27.sh > "$OUT/driver1.log" 2>&1
cat "$OUT/abL.log"
mkdir -p /tmp/p5 && rm -f /tmp/p5/*
OUT=/tmp/p5 STEPS="layouts fit" REPEAT=3 BUDGET=300 bash benchmarks/gpu_projection.sh > /tmp/p5/proj.log 2>&1
grep -E "round|^fit_wall_all.log:summary|^fit_wall_last.log:summary|^fit_wall_last.log:hg38" /tmp/p5/proj.log
tar -C /tmp -czf "$OUT/p5.tgz" p5
