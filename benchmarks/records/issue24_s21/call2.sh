#!/usr/bin/env bash
# Session 21, call 2 (16 cores): issue 24's ratio with the preload's warm-up (1643efa) beside
# fb3e74a at -t 16; the same code with a 0.5 ms GIL switch interval in the engine beside it at
# -t 16; one -t 16 run stamped (piece_timeline) with the machine's steal time around it.
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
cat "$OUT/machine.txt"
python3 benchmarks/run.py mammal30x6 --arms cpu1 --sweep 1,16 --alt-sweep 16 --alt .device/alt \
  --no-gpu --no-lastz --repeat 5 --workdir "$W" --json "$OUT/t24.jsonl" > "$OUT/t24.log" 2>&1
tail -8 "$OUT/t24.log"
python3 benchmarks/run.py mammal30x6 --arms cpu1 --sweep 16 --alt-sweep 16 --alt .device/alt_sw \
  --no-gpu --no-lastz --repeat 5 --warmup none --workdir "$W" --json "$OUT/t24sw.jsonl" \
  > "$OUT/t24sw.log" 2>&1
tail -7 "$OUT/t24sw.log"
REF=$(ls -t "$W"/ref-*.2bit | head -1); QRY=$(ls -t "$W"/query-*.2bit | head -1)
stat() { awk '/^cpu /{print $2+$3+$4+$5+$6+$7+$8+$9, $9, $5}' /proc/stat; }
for i in 1 2; do
  a=$(stat)
  timeout 60 python3 benchmarks/records/issue24_s21/piece_timeline.py.txt "$REF" "$QRY" 16 "$PWD" \
    > "$OUT/timeline_$i.log" 2>&1
  b=$(stat)
  echo "run $i: /proc/stat cpu ticks total, steal, idle before: $a after: $b"
  grep -E "^time: wall" "$OUT/timeline_$i.log"
  grep -A 18 "^threads" "$OUT/timeline_$i.log"
  grep -A 26 "^numba comp" "$OUT/timeline_$i.log"
done > "$OUT/timeline.txt"
cat "$OUT/timeline.txt" | head -120
