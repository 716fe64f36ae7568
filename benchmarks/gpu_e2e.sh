#!/usr/bin/env bash
# Claim: end to end against LASTZ on one H200 (BENCHMARKS.md, "End to end against LASTZ"): whole
# processes timed from outside (Python's start, imports, CUDA's start, reading, writing), hspZ's
# GPU backend, its CPU backend on all cores and `lastz --nogapped` (one core) in the same call,
# interleaved, REPEAT (3) runs each, through benchmarks/run.py:
#   WORKLOADS (default "hpylori ecoli S") with ARMS (default gpu,cpuN,lastz)
#   GPU_ONLY  (default "tiny M") with the gpu arm alone (LASTZ takes minutes on M): the GPU
#             points of the scaling plot
# Records in $OUT/e2e.jsonl, tables in $OUT/e2e.log, and $OUT/scaling.png: these records drawn
# with the dev machine's (benchmarks/records/dev.jsonl).  To put the GPU points into the
# committed plot, copy e2e.jsonl to benchmarks/records/h200.jsonl and run here
#   python benchmarks/plot.py benchmarks/records/*.jsonl -o benchmarks/scaling.png
# With ALT=.device/alt every hspZ arm runs beside the baseline package (device_env.sh).
#   bash benchmarks/device_files.sh                          # here, once
#   export OUT=$PWD/out && mkdir -p $OUT && bash benchmarks/gpu_e2e.sh  # 1 GPU, repository root
# ARMS=cpu1,lastz WORKLOADS=tiny GPU_ONLY= runs the steps without a GPU (a check of the script).
set -uo pipefail
source benchmarks/device_env.sh
common=(--repeat "${REPEAT:-3}" "${ALT_ARGS[@]}" --workdir "$W" --files .device/data
        --machine "$MACHINE" --json "$OUT/e2e.jsonl")
python3 benchmarks/run.py ${WORKLOADS-hpylori ecoli S} --arms "${ARMS:-gpu,cpuN,lastz}" \
  "${common[@]}" 2>&1 | tee "$OUT/e2e.log"
if [ -n "${GPU_ONLY-tiny M}" ]; then
  python3 benchmarks/run.py ${GPU_ONLY-tiny M} --arms gpu "${common[@]}" 2>&1 | tee -a "$OUT/e2e.log"
fi
python3 benchmarks/plot.py benchmarks/records/dev.jsonl "$OUT/e2e.jsonl" -o "$OUT/scaling.png" \
  --table 2>&1 | tee -a "$OUT/e2e.log"
