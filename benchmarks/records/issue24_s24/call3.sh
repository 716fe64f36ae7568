#!/usr/bin/env bash
# Session 24, call 3 (16 cores, after calls 1-2 picked sync2): the GPU tests, then issue 24's
# ratio for HEAD, whose CPU backend now loads numba on the main thread before the reads
# (backends.start_cpu), beside 98fd03c (.device/alt, the thread beside the reads) at -t 16
# (run.py, 5 rounds; REPEAT=N for N).  Made by prepare.sh here.  ROUND=b names a second call's files.
set -uo pipefail
cd "$(dirname "$0")/.."
export TESTS=${TESTS:-1} TESTS_TIMEOUT=250 ALT=.device/alt
source benchmarks/device_env.sh
R=$PWD/.device/pair/ref30.2bit; Q=$PWD/.device/pair/qry6.2bit; P=$PWD/.device/probe
cat "$OUT/machine.txt" | head -3; [ -f "$OUT/tests.log" ] && tail -n 3 "$OUT/tests.log"
echo "tests done $SECONDS s"
cp -n "$R" "$W/ref-ebe1db514fe65216.2bit"; cp -n "$Q" "$W/query-e76c334c11bb5a81.2bit"
timeout 330 python3 benchmarks/run.py mammal30x6 --arms cpu1 --sweep 1,16 --alt-sweep 16 --alt .device/alt \
  --no-gpu --no-lastz --repeat ${REPEAT:-5} --workdir "$W" --json "$OUT/t24${ROUND:-}.jsonl" > "$OUT/t24${ROUND:-}.log" 2>&1
tail -n 7 "$OUT/t24${ROUND:-}.log"; echo "ratio done $SECONDS s"
timeout 30 python3 $P/startup_timeline.py $R $Q 16 "$PWD" 2>&1 \
  | grep -v "^progress\|^time: engine\|unit ledger\|^#\|^schedule\|^lifecycle" > "$OUT/timeline${ROUND:-}.txt"
grep -E "_parallel_table|first start|exit|_load_locked|start_codegen|time: wall|read_both|prepare_|main" "$OUT/timeline${ROUND:-}.txt" | grep -v hspz-warm
echo "all done $SECONDS s"
