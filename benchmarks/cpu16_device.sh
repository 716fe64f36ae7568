#!/usr/bin/env bash
# Claim: issue 24 item 2 on the H200 machine's 16 cores (branch cpu16): where -t 16 loses time
# and what cpu16 changed there (benchmarks/cpu_probe.py: the seed-table build step by step at
# 1-16 threads and the batches per thread at -t 16, for this code, then for main's package at
# 1 and 16 threads; $OUT/cpu_probe{,_main}.{json,log}), then the thread sweep of this code
# against main (`benchmarks/run.py mammal30x6 --sweep 1,2,4,8,16 --alt-sweep 1,16`, the same
# digest required; $OUT/cpu16.jsonl, $OUT/cpu16.log).  About 5 minutes on 16 cores.
# Run HERE first (fills .device/, with main's package in .device/alt):
#   ALT=main bash benchmarks/device_files.sh
# then, on the device, from the repository root:
#   export OUT=$PWD/out && mkdir -p $OUT && bash benchmarks/cpu16_device.sh
# PROBE (first argument) runs the probe of this code alone (no .device/ needed); ALT= (empty)
# leaves main out; SWEEP / ALT_SWEEP / REPEAT override the sweep's defaults.
set -uo pipefail
ALT=${ALT-.device/alt}
source benchmarks/device_env.sh
python3 benchmarks/cpu_probe.py --workdir "$W" --json "$OUT/cpu_probe.json" 2>&1 \
  | tee "$OUT/cpu_probe.log"
[ "${1:-}" = PROBE ] && exit 0
[ -n "$ALT" ] && [ ! -d "$ALT/hspz" ] && { echo "no $ALT/hspz: run ALT=main bash benchmarks/device_files.sh here first" >&2; exit 2; }
[ -n "$ALT" ] && python3 benchmarks/cpu_probe.py --hspz "$ALT" --threads 1,16 --repeat 2 \
  --passes warm --workdir "$W" --json "$OUT/cpu_probe_main.json" 2>&1 | tee "$OUT/cpu_probe_main.log"
python3 benchmarks/run.py mammal30x6 --arms cpu1 --sweep "${SWEEP:-1,2,4,8,16}" \
  --alt-sweep "${ALT_SWEEP:-1,16}" --no-gpu --no-lastz --repeat "${REPEAT:-1}" \
  "${ALT_ARGS[@]}" --workdir "$W" --machine "$MACHINE" --json "$OUT/cpu16.jsonl" \
  2>&1 | tee "$OUT/cpu16.log"
