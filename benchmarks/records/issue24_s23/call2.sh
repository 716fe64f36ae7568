#!/usr/bin/env bash
# Session 23, call 2 (the same warm machine as call 1, issued at once after it).  Picks from
# call 1's variants (kept in /tmp/variants.txt): if the fastest of sync/sync2/early beat base by
# 2% or more (median process time, 5 rounds at -t 16), issue 24's ratio of that variant's tree
# beside HEAD, both at -t 1 and 16 (run.py, 5 rounds); else the GPU tests and HEAD's ratio again
# (fb3e74a beside it at -t 16).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$PWD/.device/pair/ref30.2bit; Q=$PWD/.device/pair/qry6.2bit
pick=$(python3 - <<'PY'
import re, statistics, collections
t = collections.defaultdict(list)
for line in open("/tmp/variants.txt"):
    m = re.search(r" (\w+) process ([\d.]+)$", line.strip())
    if m: t[m[1]].append(float(m[2]))
med = {k: statistics.median(v) for k, v in t.items()}
best = min(("sync", "sync2", "early"), key=lambda k: med.get(k, 1e9))
print(best if med.get(best, 1e9) <= 0.98 * med.get("base", 0) else "none", flush=True)
PY
)
echo "picked: $pick"
if [ "$pick" = none ]; then export TESTS=1 TESTS_TIMEOUT=250; fi
source benchmarks/device_env.sh
cp -n "$R" "$W/ref-ebe1db514fe65216.2bit"; cp -n "$Q" "$W/query-e76c334c11bb5a81.2bit"
if [ "$pick" = none ]; then
  tail -n 3 "$OUT/tests.log"; echo "tests done $SECONDS s"
  timeout 320 python3 benchmarks/run.py mammal30x6 --arms cpu1 --sweep 1,16 --alt-sweep 16 --alt .device/alt \
    --no-gpu --no-lastz --repeat 5 --workdir "$W" --json "$OUT/t24b.jsonl" > "$OUT/t24b.log" 2>&1
else
  timeout 540 python3 benchmarks/run.py mammal30x6 --arms cpu1 --sweep 1,16 --alt-sweep 1,16 --alt .device/var/$pick \
    --no-gpu --no-lastz --repeat 5 --workdir "$W" --json "$OUT/t24b.jsonl" > "$OUT/t24b.log" 2>&1
fi
tail -n 8 "$OUT/t24b.log"; echo "all done $SECONDS s"
