#!/usr/bin/env bash
# Session 21, call 1 (16 cores): issue 24's ratio with a piece's sweep, gate and compaction
# compiled (5992ab4) beside fb3e74a at -t 16; one -t 16 run of each under py-spy --gil
# (which thread holds the GIL, sampled); then the GPU tests on this tree.
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
cat "$OUT/machine.txt"
python3 benchmarks/run.py mammal30x6 --arms cpu1 --sweep 1,16 --alt-sweep 16 --alt .device/alt \
  --no-gpu --no-lastz --repeat 5 --workdir "$W" --json "$OUT/t24.jsonl" > "$OUT/t24.log" 2>&1
tail -9 "$OUT/t24.log"
REF=$(ls -t "$W"/ref-*.2bit | head -1); QRY=$(ls -t "$W"/query-*.2bit | head -1)
for arm in new old; do
  pp=$PWD; [ $arm = old ] && pp=$PWD/.device/alt
  rm -rf /tmp/gil_out
  PYTHONPATH=$pp timeout 120 .device/bin/py-spy record --gil --nonblocking -r 250 -f raw \
    -o "$OUT/gil_$arm.txt" -- python3 -m hspz run -r "$REF" -q "$QRY" -o /tmp/gil_out \
    --backend cpu -t 16 --time > "$OUT/gil_$arm.log" 2>&1
  grep -E "^time: (wall|engine: )|digest" "$OUT/gil_$arm.log"
done
for arm in new old; do
  pp=$PWD; [ $arm = old ] && pp=$PWD/.device/alt
  timeout 60 python3 benchmarks/records/issue24_s21/piece_timeline.py.txt "$REF" "$QRY" 16 "$pp" \
    > "$OUT/timeline_$arm.log" 2>&1
  grep -A 40 "^threads" "$OUT/timeline_$arm.log" | head -60
done
timeout 280 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py > "$OUT/tests.log" 2>&1
tail -3 "$OUT/tests.log"
