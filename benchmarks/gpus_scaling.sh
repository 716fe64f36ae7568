#!/usr/bin/env bash
# Claim: several GPUs (BENCHMARKS.md, "Several GPUs"): `hspZ run --gpus 2` against `--gpus 1` on
# nvidia-h200-x2, whole processes timed from outside, interleaved (1, 2 in each round), REPEAT
# (3) rounds through benchmarks/run.py, on PAIR (default XXL: 2000 x 1000 Mbp, -B 250M, 32
# units; XL: 1000 x 500 Mbp, 8 units).  The pair is generated in $W on the device (XXL about
# 150 s on 32 cores) and stays there for the next call on the same warm machine.  Records
# (busy time per worker, first unit's start, --time phases) in $OUT/gpus.jsonl, the table in
# $OUT/gpus.log.  SMI=1 samples every GPU's clocks, power, temperature, load and clock-event
# reasons every 500 ms into $OUT/smi.csv (and vmstat every 2 s into $OUT/vmstat.log).
# XXL at REPEAT=3 (about 700 s with generating) does not fit one 600 s call: run REPEAT=1, then
# REPEAT=2 on the warm machine, and read both calls' records together:
#   export OUT=$PWD/out && mkdir -p $OUT && REPEAT=1 SMI=1 bash benchmarks/gpus_scaling.sh  # 2 GPUs, repository root
#   export OUT=$PWD/out && mkdir -p $OUT && REPEAT=2 SMI=1 bash benchmarks/gpus_scaling.sh  # 2 GPUs, repository root
#   python benchmarks/plot.py FIRST/gpus.jsonl SECOND/gpus.jsonl --sessions all --table   # here
# With ALT=.device/alt every arm runs beside the baseline package (device_env.sh).
# BACKEND=cpu PAIR=tiny runs the steps on the CPU backend (cpu1 against cpu2: a check of the script).
set -uo pipefail
source benchmarks/device_env.sh
if [ "${SMI:-0}" = 1 ]; then
  nvidia-smi -q -d POWER,CLOCK,PERFORMANCE,TEMPERATURE > "$OUT/smi_q.txt" 2>&1
  Q=timestamp,index,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu
  Q=$Q,utilization.memory,clocks_event_reasons.active,pstate
  nvidia-smi --query-gpu=$Q --format=csv -lms 500 > "$OUT/smi.csv" 2>&1 &
  vmstat -t 2 > "$OUT/vmstat.log" 2>&1 &
  trap 'kill $(jobs -p) 2>/dev/null' EXIT
fi
ARMS=gpu1,gpu2; [ "${BACKEND:-gpu}" = cpu ] && ARMS=cpu1,cpu2
python3 benchmarks/run.py "${PAIR:-XXL}" --arms "$ARMS" --hspz-args "-B 250M" \
  --repeat "${REPEAT:-3}" "${ALT_ARGS[@]}" --workdir "$W" --machine "$MACHINE" \
  --json "$OUT/gpus.jsonl" 2>&1 | tee "$OUT/gpus.log"
python3 benchmarks/plot.py "$OUT/gpus.jsonl" --sessions all --table | tee -a "$OUT/gpus.log"
