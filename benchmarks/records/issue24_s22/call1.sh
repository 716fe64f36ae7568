#!/usr/bin/env bash
# Session 22's planned call 1 (16 cores), never run: no device could be had that session.  Where
# a -t 16 run's first second goes, and variants of its start side by side at -t 16 (prepare.sh
# says which): numba imported on the main thread before the reads; that and its code generator;
# the code before the table's transient k-mers left numpy's huge pages.
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh
R=$PWD/.device/pair/ref30.2bit; Q=$PWD/.device/pair/qry6.2bit; P=$PWD/.device/probe
cat "$OUT/machine.txt"; cat /sys/kernel/mm/transparent_hugepage/defrag
# warm numba's cache and the bytecode cache of each tree (a fresh machine compiles once)
for v in base sync sync2 prior; do
  (cd .device/var/$v && PYTHONPATH=$PWD python3 -m hspz run -r $R -q $Q -o /tmp/warm_out --backend cpu -t 16 > /dev/null 2>&1); rm -rf /tmp/warm_out
done
python3 -m hspz run -r $R -q $Q -o /tmp/warm_out --backend cpu -t 16 > /dev/null 2>&1; rm -rf /tmp/warm_out
echo "warm-ups done $SECONDS s"
{
for i in 1 2 3; do python3 $P/startup_parts.py $R $Q 2>&1 | head -1; done
python3 $P/startup_parts.py $R $Q 2>&1 | tail -9
for m in thp nothp thp nothp; do python3 $P/table_thp.py $R $Q $m 16; done
} > "$OUT/parts.txt" 2>&1
cat "$OUT/parts.txt"; echo "parts done $SECONDS s"
for r in 1 2 3 4 5; do for v in base sync sync2 prior; do
  rm -rf /tmp/o4; a=$(date +%s.%N)
  (cd .device/var/$v && PYTHONPATH=$PWD python3 -m hspz run -r $R -q $Q -o /tmp/o4 --backend cpu -t 16 --time 2>&1 \
    | grep -E "engine: (table|first pass)|time: wall|digest" | cut -c1-52 | tr '\n' ' ')
  echo " $v process $(python3 -c "print(round($(date +%s.%N) - $a, 3))")"
done; done > "$OUT/variants.txt" 2>&1
cat "$OUT/variants.txt"; echo "variants done $SECONDS s"
for mode in default SYNC SWITCH; do
  for i in 1 2; do
    env $( [ $mode = SYNC ] && echo PROBE_SYNC=2 ) $( [ $mode = SWITCH ] && echo PROBE_SWITCH=0.0005 ) python3 $P/startup_timeline.py $R $Q 16 "$PWD" 2>&1 \
      | grep -v "^progress\|^time: engine\|unit ledger\|^#\|^schedule\|^lifecycle" | sed "s/^/[$mode $i] /"
  done
done > "$OUT/timeline.txt" 2>&1
grep -E "_parallel_table|first start|exit|_load_locked|start_codegen|warm_loops|time: wall|read_both|prepare_|sync|main" "$OUT/timeline.txt" | grep -v hspz-warm
echo "all done $SECONDS s"
