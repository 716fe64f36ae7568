#!/usr/bin/env bash
# Session 20, call 3 (H200): item 3, L100 at six layouts three rounds, fitted on 50M and 100M,
# the other four projected unit by unit; the hg38 x mm39-sized projection.
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/machine.txt"
mkdir -p /tmp/p3 && rm -f /tmp/p3/*
OUT=/tmp/p3 STEPS="layouts fit" REPEAT=3 BUDGET=75 bash benchmarks/gpu_projection.sh > /tmp/p3/proj.log 2>&1
grep -E "round|^fit_wall_all.log:summary|^fit_wall_last.log:summary|^fit_wall_last.log:hg38" /tmp/p3/proj.log
tar -C /tmp -czf "$OUT/layouts.tgz" p3
