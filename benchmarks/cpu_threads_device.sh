#!/usr/bin/env bash
# Claim: the CPU backend's thread scaling (issue 24; BENCHMARKS.md, "CPU thread scaling"):
# `hspZ run --backend cpu -t K` on the mammal-like 30 x 6 Mbp pair (benchmarks/workloads.toml,
# mammal30x6), this code at K = 1, 2, 4, 8, 16 and the code before issue 19 (dd12177) at
# K = 1, 4, 16, interleaved by K, one run each (REPEAT), whole processes timed from outside
# through benchmarks/run.py --sweep: wall, engine, peak RSS, the preflight's estimate and the
# engine's per-thread phases, one JSON record a run in $OUT/cpu_threads.jsonl, the table in
# $OUT/cpu_threads.log.  The pair is generated on the device in $W (a few seconds).  About
# 6 minutes on the H200 machine's 16 cores (dd12177 at -t 1 is the longest run).
# Run HERE first (fills .device/, with dd12177's package in .device/alt):
#   ALT=dd12177 bash benchmarks/device_files.sh
# then:
#   export OUT=$PWD/out && mkdir -p $OUT && bash benchmarks/cpu_threads_device.sh  # 1 GPU, repository root
#   python benchmarks/plot.py OUT/cpu_threads.jsonl --threads scaling.png   # here
# SWEEP / ALT_SWEEP / PAIR / REPEAT override the defaults; ALT= (empty) runs this code alone.
set -uo pipefail
ALT=${ALT-.device/alt}
[ -n "$ALT" ] && [ ! -d "$ALT/hspz" ] && { echo "no $ALT/hspz: run ALT=dd12177 bash benchmarks/device_files.sh here first" >&2; exit 2; }
source benchmarks/device_env.sh
python3 -c 'import numba, numpy; print("numba", numba.__version__, "numpy", numpy.__version__)' \
  | tee -a "$OUT/machine.txt"
python3 benchmarks/run.py "${PAIR:-mammal30x6}" --arms cpu1 --sweep "${SWEEP:-1,2,4,8,16}" \
  --alt-sweep "${ALT_SWEEP:-1,4,16}" --no-gpu --no-lastz --repeat "${REPEAT:-1}" \
  "${ALT_ARGS[@]}" --workdir "$W" --machine "$MACHINE" --json "$OUT/cpu_threads.jsonl" \
  2>&1 | tee "$OUT/cpu_threads.log"
python3 benchmarks/plot.py "$OUT/cpu_threads.jsonl" --threads "$OUT/cpu_threads.png" \
  2>&1 | tee -a "$OUT/cpu_threads.log"
