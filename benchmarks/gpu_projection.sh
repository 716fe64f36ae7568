#!/usr/bin/env bash
# Issue 27 on one H200, items 3 and 1 in one call:
#   M       (VARIANTS, default base and HSPZ_GPU_FILTER=hits2, hits4, lane, lane4)
#           the filter variants side by side on simM in one process (benchmarks/gpu_variants.py:
#           ROUNDS (3) x PASSES (3) interleaved, ledger GPU ns/hit, digests checked, a per-kernel
#           breakdown); $OUT/variants_M.*.  L100 is generated in the background meanwhile
#   LVAR    the same variants on L100 at -B 250M, LROUNDS (1) x 1 pass (also the layouts'
#           warm-up: its first pass compiles what L100's sizes add); $OUT/variants_L100.*
#   layouts `hspZ run --time` on L100 at each of LAYOUTS (-B; default 50M 100M 125M 175M 250M
#           500M), REPEAT (2) rounds, each layout in turn, a cold process each; logs
#           $OUT/run-B<layout>-<round>.log.  A round starts only while SECONDS < BUDGET (300)
#   fit     benchmarks/projection_fit.py on those logs: fitted on FIT (default 50M,100M), every
#           other layout projected unit by unit from its own ledger and compared (wall steps;
#           and the ledger's gpu_ms), once over every round and once over the last round only
#           (a first round may still compile a reduction size), fitted on FIT2 (50M,500M), and
#           with the sixth term (ns/hit growing with the bin); $OUT/fit_*.log, fit.jsonl,
#           pricing.json (the wall fit over the last round), and the hg38 x mm39-sized projection
#   est     (EST=1) `hspZ hits-estimate --pricing $OUT/pricing.json` at -B 100M (CPU only,
#           timeout 90 s) and its rows against the fit's projection of the same ledger
#   tests   tests/test_gpu.py with HSPZ_GPU_FILTER set to the variant with the lowest simM median
#           (TEST_FILTER overrides; base: unset), timeout min(TESTS_TIMEOUT (200), 570 - SECONDS);
#           $OUT/tests.log
# STEPS (default "M LVAR layouts fit est tests") picks the parts.  Prints a short summary.
#   bash benchmarks/device_files.sh    # here, once: .device/ travels with the tree
#   export OUT=$PWD/out && mkdir -p $OUT && bash benchmarks/gpu_projection.sh  # 1 GPU, repository root
# BACKEND=cpu MW=tiny LW=tiny LAYOUTS='1M 2M' FIT=1M STEPS='layouts fit' runs the layout and
# fit steps on the CPU backend (a check of the script on a machine without a GPU).
set -uo pipefail
source benchmarks/device_env.sh
STEPS=${STEPS:-M LVAR layouts fit est tests}
VARIANTS=${VARIANTS:-base,HSPZ_GPU_FILTER=hits2,HSPZ_GPU_FILTER=hits4,HSPZ_GPU_FILTER=lane,HSPZ_GPU_FILTER=lane4}
LAYOUTS=${LAYOUTS:-50M 100M 125M 175M 250M 500M}
FIT=${FIT:-50M,100M}  # the two layouts with the most units (BENCHMARKS.md, issue 27, ninth session)
BUDGET=${BUDGET:-300}
BACKEND=${BACKEND:-gpu}
has() { [[ " $STEPS " == *" $1 "* ]]; }
stamp() { echo "[$SECONDS s] $*"; }
(nice -n 10 python3 benchmarks/workloads.py "${LW:-L100}" --workdir "$W" > /tmp/l100.paths \
   2> /tmp/l100.err; echo "L100 generated at $SECONDS s" >> /tmp/l100.err) &
GEN=$!
if has M; then
  read -r MREF MQRY < <(python3 benchmarks/workloads.py "${MW:-M}" --workdir "$W" | cut -f2 | paste -sd' ')
  stamp "M ready: $MREF $MQRY"
  timeout "${M_TIMEOUT:-150}" python3 benchmarks/gpu_variants.py "$MREF" "$MQRY" --variants "$VARIANTS" \
    --rounds "${ROUNDS:-3}" --passes "${PASSES:-3}" --breakdown --json "$OUT/variants_M.jsonl" \
    > "$OUT/variants_M.log" 2>&1
  echo "variants_M exit $?" >> "$OUT/variants_M.log"
  grep -v "^round" "$OUT/variants_M.log"
  stamp "M variants done"
fi
wait "$GEN"
tail -2 /tmp/l100.err
read -r LREF LQRY < <(cut -f2 /tmp/l100.paths | paste -sd' ')
stamp "L100 ready: $LREF $LQRY"
if has LVAR; then
  timeout "${L_TIMEOUT:-80}" python3 benchmarks/gpu_variants.py "$LREF" "$LQRY" --variants "$VARIANTS" \
    --rounds "${LROUNDS:-1}" --passes 1 --hspz-args "-B 250M" --json "$OUT/variants_L100.jsonl" \
    > "$OUT/variants_L100.log" 2>&1
  echo "variants_L100 exit $?" >> "$OUT/variants_L100.log"
  grep -v "^round" "$OUT/variants_L100.log"
  stamp "L100 variants done"
fi
last=0
if has layouts; then
  for round in $(seq "${REPEAT:-2}"); do
    if [ "$round" -gt 1 ] && [ "$SECONDS" -ge "$BUDGET" ]; then
      stamp "round $round skipped: past BUDGET=$BUDGET s"; break
    fi
    for b in $LAYOUTS; do
      timeout 90 python3 -m hspz run -r "$LREF" -q "$LQRY" -B "$b" --backend "$BACKEND" --time \
        -o "/tmp/proj_out" > "$OUT/run-B$b-$round.log" 2>&1 || echo "run -B $b round $round failed: $?"
      rm -rf /tmp/proj_out
      stamp "-B $b round $round: $(grep -c '^unit ledger:	[0-9]' "$OUT/run-B$b-$round.log") units, $(grep '^time: wall' "$OUT/run-B$b-$round.log" | awk '{print $3}') s wall"
    done
    last=$round
  done
fi
if has fit && [ "$last" -gt 0 ]; then
  all=$(ls "$OUT"/run-B*-*.log)
  lastr=$(ls "$OUT"/run-B*-"$last".log)
  python3 benchmarks/projection_fit.py $lastr --fit "$FIT" --pricing-out "$OUT/pricing.json" \
    --json "$OUT/fit.jsonl" > "$OUT/fit_wall_last.log" 2>&1
  python3 benchmarks/projection_fit.py $all --fit "$FIT" --json "$OUT/fit.jsonl" > "$OUT/fit_wall_all.log" 2>&1
  python3 benchmarks/projection_fit.py $lastr --fit "$FIT" --target gpu --json "$OUT/fit.jsonl" \
    > "$OUT/fit_gpu_last.log" 2>&1
  python3 benchmarks/projection_fit.py $lastr --fit "${FIT2:-50M,500M}" --json "$OUT/fit.jsonl" \
    > "$OUT/fit_wall_last_fit2.log" 2>&1
  python3 benchmarks/projection_fit.py $lastr --fit "$FIT" --json "$OUT/fit.jsonl" --terms \
    unit_ms,worker_ms,ref_ms_per_mbp,query_ms_per_mbp,ns_per_hit,ns_per_hit_per_ref_gbp \
    > "$OUT/fit_wall_last_six.log" 2>&1
  stamp "fits done"
fi
if has est && [ "${EST:-1}" = 1 ] && [ -f "$OUT/pricing.json" ]; then
  eb=${EST_B:-100M}
  timeout "${EST_TIMEOUT:-90}" python3 -m hspz hits-estimate -r "$LREF" -q "$LQRY" -B "$eb" \
    --pricing "$OUT/pricing.json" > "$OUT/estimate-B$eb.tsv" 2> "$OUT/estimate-B$eb.err"
  echo "hits-estimate exit $?" >> "$OUT/estimate-B$eb.err"
  python3 benchmarks/projection_fit.py $lastr --fit "$FIT" --estimate "$eb=$OUT/estimate-B$eb.tsv" \
    > "$OUT/fit_estimate.log" 2>&1
  stamp "estimate done"
fi
if has tests; then
  best=${TEST_FILTER:-$(grep -E "^[^ ]+: ns/hit median" "$OUT/variants_M.log" 2>/dev/null \
    | sort -t' ' -k4 -g | head -1 | cut -d: -f1)}
  best=${best:-base}
  left=$((570 - SECONDS)); limit=${TESTS_TIMEOUT:-200}; [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -gt 30 ]; then
    stamp "GPU tests with ${best} (timeout $limit s)"
    env $([ "$best" = base ] || echo "$best") timeout "$limit" python3 -m pytest -q \
      -p no:cacheprovider tests/test_gpu.py > "$OUT/tests.log" 2>&1
    echo "GPU tests with $best: $(tail -1 "$OUT/tests.log")"
  else
    stamp "GPU tests skipped: $left s left"
  fi
fi
echo "===== summary"
grep -H "ns/hit median\|DIGESTS\|exit" "$OUT"/variants_*.log 2>/dev/null | sed "s|^$OUT/||"
grep -H "^fit on\|^summary\|^hg38 x mm39-sized:\|^hits-estimate flags" "$OUT"/fit_*.log 2>/dev/null \
  | sed "s|^$OUT/||"
grep -h "^estimate " "$OUT/fit_estimate.log" 2>/dev/null
tail -n 3 "$OUT"/estimate-B*.err 2>/dev/null
stamp "done"
