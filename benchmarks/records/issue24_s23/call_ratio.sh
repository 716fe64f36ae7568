#!/usr/bin/env bash
# Session 23, the call that 432 s of device time left could hold (fifteen starts had failed):
# issue 24's ratio for HEAD alone (run.py, -t 1 and 16, 5 rounds), then one -t 16 run stamped.
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
R=$PWD/.device/pair/ref30.2bit; Q=$PWD/.device/pair/qry6.2bit; P=$PWD/.device/probe
cat "$OUT/machine.txt"
cp -n "$R" "$W/ref-ebe1db514fe65216.2bit"; cp -n "$Q" "$W/query-e76c334c11bb5a81.2bit"
python3 benchmarks/run.py mammal30x6 --arms cpu1 --sweep 1,16 --no-gpu --no-lastz --repeat 5 \
  --workdir "$W" --json "$OUT/t24.jsonl" > "$OUT/t24.log" 2>&1
tail -n 6 "$OUT/t24.log"; echo "ratio done $SECONDS s"
timeout 30 python3 $P/startup_timeline.py $R $Q 16 "$PWD" 2>&1 \
  | grep -v "^progress\|^time: engine\|unit ledger\|^#\|^schedule\|^lifecycle" > "$OUT/timeline.txt"
grep -E "_parallel_table|first start|exit|_load_locked|start_codegen|time: wall|read_both|prepare_|main" "$OUT/timeline.txt" | grep -v hspz-warm
echo "all done $SECONDS s"
