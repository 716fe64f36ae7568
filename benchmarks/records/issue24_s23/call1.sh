#!/usr/bin/env bash
# Session 23, call 1 (16 cores): issue 24's ratio for HEAD (run.py, 5 rounds, fb3e74a beside it
# at -t 16); then session 22's planned startup variants at -t 16, 5 interleaved rounds, in one
# tree through variant.py (base, sync, sync2, early); one -t 16 run stamped.  (Trimmed after
# eleven failed starts had left 792 s of the budget: a1faed9's tree and table_touch.py dropped.)
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
R=$PWD/.device/pair/ref30.2bit; Q=$PWD/.device/pair/qry6.2bit; P=$PWD/.device/probe
cat "$OUT/machine.txt"; cat /sys/kernel/mm/transparent_hugepage/defrag
# the pair run.py would simulate (same bytes, digest 5f54398c77a6c3a9), under the names it looks for
cp -n "$R" "$W/ref-ebe1db514fe65216.2bit"; cp -n "$Q" "$W/query-e76c334c11bb5a81.2bit"
timeout 330 python3 benchmarks/run.py mammal30x6 --arms cpu1 --sweep 1,16 --alt-sweep 16 --alt .device/alt \
  --no-gpu --no-lastz --repeat 5 --workdir "$W" --json "$OUT/t24.jsonl" > "$OUT/t24.log" 2>&1
tail -n 7 "$OUT/t24.log"; echo "ratio done $SECONDS s"
for r in 1 2 3 4 5; do for v in base sync sync2 early; do
  rm -rf /tmp/o4; a=$(date +%s.%N)
  python3 $P/variant.py $v run -r $R -q $Q -o /tmp/o4 --backend cpu -t 16 --time 2>&1 \
    | grep -E "engine: (table|first pass)|time: wall|digest" | cut -c1-52 | tr '\n' ' '
  echo " $v process $(python3 -c "print(round($(date +%s.%N) - $a, 3))")"
done; done > "$OUT/variants.txt" 2>&1
cp "$OUT/variants.txt" /tmp/variants.txt; cat "$OUT/variants.txt"; echo "variants done $SECONDS s"
timeout 30 python3 $P/startup_timeline.py $R $Q 16 "$PWD" 2>&1 \
  | grep -v "^progress\|^time: engine\|unit ledger\|^#\|^schedule\|^lifecycle" > "$OUT/timeline.txt"
grep -E "_parallel_table|first start|exit|_load_locked|start_codegen|time: wall|read_both|prepare_|main" "$OUT/timeline.txt" | grep -v hspz-warm
echo "all done $SECONDS s"
