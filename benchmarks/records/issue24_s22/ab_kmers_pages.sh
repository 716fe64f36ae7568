#!/usr/bin/env bash
# Session 22: two hspz trees side by side at -t 2, 8 rounds, the order alternated each round;
# prints each run's table phase, first pass and wall (`--time`) and the process's wall.
#   bash ab_kmers_pages.sh OLD_TREE NEW_TREE REF QUERY   (trees: folders holding hspz/)
# Recorded: ab_kmers_pages_dev2.log (OLD a1faed9 "base", NEW 17a6071's change "nothp").
set -uo pipefail
OLD=$1 NEW=$2 R=$3 Q=$4 PY=${PY:-python3}
for r in 1 2 3 4 5 6 7 8; do
  if [ $((r % 2)) = 1 ]; then order="$OLD $NEW"; else order="$NEW $OLD"; fi
  for v in $order; do
    rm -rf /tmp/ab_out; a=$(date +%s.%N)
    (cd "$v" && PYTHONPATH=$PWD "$PY" -m hspz run -r "$R" -q "$Q" -o /tmp/ab_out --backend cpu -t 2 --time 2>&1 \
      | grep -E "engine: (table|first pass)|time: wall" | cut -c1-52 | tr "\n" " ")
    echo "$(basename "$v") process $("$PY" -c "print(round($(date +%s.%N) - $a, 3))")"
  done
done
