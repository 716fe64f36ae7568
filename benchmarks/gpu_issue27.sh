#!/usr/bin/env bash
# Issue 27 on one H200: the GPU filter's variants side by side (benchmarks/gpu_variants.py), what
# bounds the filter (Nsight Compute, where installed), and the first unit's kernel compilation.
# STEPS (default "compile M ncu L100") picks the parts:
#   compile  `hspZ run --time` on M twice with a fresh CUPY_CACHE_DIR: the first compiles every
#            kernel, the second (cold process, warm cache) does not; $OUT/compile.log.  With
#            WARM=1 an `hspZ warm` runs before them into the same fresh cache, and the log
#            names the kernels the first run still compiled (CUPY_CACHE_SAVE_CUDA_SOURCE)
#   M        VARIANTS (default base) on simM, ROUNDS (3) x PASSES (2) timed
#            passes each, interleaved, plus a per-kernel breakdown; $OUT/variants_M.*
#            (a variant: base or NAME=VALUE[+NAME=VALUE], gpu_variants.py)
#   ncu      filter kernels (names filter_*) under ncu, NCU_COUNT (2) launches, for each of
#            NCU_VARIANTS (default base; a variant as in M); $OUT/ncu.txt
#   L100     the variants on L100 at -B 250M (generated in the background from the start);
#            $OUT/variants_L100.*
#   tests    tests/test_gpu.py; $OUT/tests.log
#   kprof    every kernel of one simM run, by name (nsys, else ncu's durations); $OUT/kprof.txt
#   ab       `hspZ benchmark` on simM, this code and .device/alt in turn, ROUNDS (2) rounds;
#            $OUT/ab.*
#   abL      `hspZ run --time -B 250M` on L100 (a pair of 2 units, which `benchmark` refuses),
#            this code and .device/alt in turn, LROUNDS (2) rounds after one untimed run each;
#            ledger ns/hit per run in $OUT/abL.log
#   export OUT=$PWD/out && mkdir -p $OUT && bash benchmarks/gpu_issue27.sh  # 1 GPU, repository root
set -uo pipefail
source benchmarks/device_env.sh
STEPS=${STEPS:-compile M ncu L100}
VARIANTS=${VARIANTS:-base}
has() { [[ " $STEPS " == *" $1 "* ]]; }
if has L100 || has abL; then
  (nice -n 19 python3 benchmarks/workloads.py "${LW:-L100}" --workdir "$W" > /tmp/l100.paths 2>/tmp/l100.err) &
  GEN=$!
fi
if has tests; then
  timeout "${TESTS_TIMEOUT:-300}" python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py \
    > "$OUT/tests.log" 2>&1
  echo "GPU tests: $(tail -1 "$OUT/tests.log")"
fi
t0=$SECONDS
read -r MREF MQRY < <(python3 benchmarks/workloads.py "${MW:-M}" --workdir "$W" | cut -f2 | paste -sd' ')
echo "M ready in $((SECONDS - t0)) s: $MREF $MQRY"
if has compile; then
  export CC_DIR=/tmp/cupy_fresh_$$
  kernels() { grep -ho 'void [A-Za-z_0-9]*(' $(find $CC_DIR -name '*.cu' 2>/dev/null) 2>/dev/null | sort; }
  {
    if [ "${WARM:-0}" = 1 ]; then
      s=$(date +%s.%N)
      CUPY_CACHE_SAVE_CUDA_SOURCE=1 CUPY_CACHE_DIR=$CC_DIR python3 -m hspz warm 2>&1 | tail -3
      echo "hspZ warm: $(python3 -c "import time; print(round(time.time() - $s, 3))") s, cache files: $(find $CC_DIR -type f | wc -l)"
      kernels > /tmp/kernels_warm.txt
    fi
    for c in first second; do
      echo "== $c process, CUPY_CACHE_DIR=$CC_DIR"
      s=$(date +%s.%N)
      CUPY_CACHE_SAVE_CUDA_SOURCE=1 CUPY_CACHE_DIR=$CC_DIR timeout 90 python3 -m hspz run -r "$MREF" -q "$MQRY" \
        -o "/tmp/compile_$c" --time 2>&1 | grep -E "unit ledger:|digest|wall|workers"
      echo "process wall: $(python3 -c "import time; print(round(time.time() - $s, 3))") s"
      echo "cache files: $(find $CC_DIR -type f | wc -l)"
    done
    if [ -f /tmp/kernels_warm.txt ]; then
      echo "kernels the M run compiled that warm did not:"
      kernels | comm -13 /tmp/kernels_warm.txt - | uniq -c
    fi
  } > "$OUT/compile.log" 2>&1
  cat "$OUT/compile.log"
fi
if has M; then
  timeout "${M_TIMEOUT:-220}" python3 benchmarks/gpu_variants.py "$MREF" "$MQRY" --variants "$VARIANTS" \
    --rounds "${ROUNDS:-3}" --passes "${PASSES:-2}" --breakdown --json "$OUT/variants_M.jsonl" \
    2>&1 | tee "$OUT/variants_M.log" | grep -v "^round\|^timeline"
fi
if has ncu; then
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  echo "ncu: ${NCU:-not installed}" | tee "$OUT/ncu.txt"
  if [ -n "$NCU" ]; then
    for v in ${NCU_VARIANTS:-base}; do
      echo "===== $v" >> "$OUT/ncu.txt"
      # the variant's settings (environment or gpu.X, gpu_variants.apply), then the run
      timeout "${NCU_TIMEOUT:-100}" "$NCU" --clock-control none \
        -k regex:filter_ -c "${NCU_COUNT:-2}" --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section Occupancy --section SchedulerStats --section WarpStateStats \
        --metrics lts__t_sector_hit_rate.pct,dram__bytes_read.sum,smsp__thread_inst_executed_per_inst_executed.ratio,smsp__inst_executed.sum \
        python3 -c 'import sys; from benchmarks.gpu_variants import apply; apply(sys.argv[1]); from hspz.cli import main; sys.exit(main(sys.argv[2:]))' \
        "$v" run -r "$MREF" -q "$MQRY" -o "/tmp/ncu_$v" >> "$OUT/ncu.txt" 2>&1
    done
    grep -E "=====|filter_|smsp__|Duration|DRAM Throughput|L2 Hit|lts__t_sector_hit_rate|dram__bytes|Memory Throughput|Compute \(SM\)|Achieved Occupancy|Registers|No Eligible|Issued Warp" "$OUT/ncu.txt" | head -80
  fi
fi
if has kprof; then  # every kernel of one simM run by name: what the ledger's "rest" is
  NSYS=$(command -v nsys || ls /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/bin/nsys 2>/dev/null | head -1)
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  python3 -m hspz run -r "$MREF" -q "$MQRY" -o /tmp/kprof_warm > /dev/null 2>&1  # kernels compiled
  if [ -n "$NSYS" ]; then
    echo "nsys: $NSYS" > "$OUT/kprof.txt"
    timeout "${KPROF_TIMEOUT:-150}" "$NSYS" profile -t cuda -o /tmp/kprof -f true \
      python3 -m hspz run -r "$MREF" -q "$MQRY" -o /tmp/kprof_run --time >> "$OUT/kprof.txt" 2>&1
    "$NSYS" stats -q -r cuda_gpu_kern_sum -f csv /tmp/kprof.nsys-rep > /tmp/kprof.csv 2>> "$OUT/kprof.txt"
    python3 benchmarks/kernel_table.py nsys /tmp/kprof.csv >> "$OUT/kprof.txt"
  elif [ -n "$NCU" ]; then
    echo "ncu (no nsys): $NCU" > "$OUT/kprof.txt"
    timeout "${KPROF_TIMEOUT:-150}" "$NCU" --clock-control none --metrics gpu__time_duration.sum \
      --csv --print-units base python3 -m hspz run -r "$MREF" -q "$MQRY" -o /tmp/kprof_run \
      > /tmp/kprof.csv 2>> "$OUT/kprof.txt"
    python3 benchmarks/kernel_table.py ncu /tmp/kprof.csv >> "$OUT/kprof.txt"
  else
    echo "kprof: neither nsys nor ncu" > "$OUT/kprof.txt"
  fi
  tail -45 "$OUT/kprof.txt"
fi
# each_tree FIRST LAST FN: FN TAG ROUND in this tree (cur) and then .device/alt (alt), each round
each_tree() {
  for round in $(seq "$1" "$2"); do
    for dir in "$PWD" "$PWD/.device/alt"; do
      tag=cur; [ "$dir" != "$PWD" ] && tag=alt
      (cd "$dir" && PYTHONPATH=$dir "$3" "$tag" "$round")
    done
  done
}
ab_one() {
  timeout 100 python3 -m hspz benchmark -r "$MREF" -q "$MQRY" --warmup 1 --iterations 3 \
    --json "$OUT/ab_$1.jsonl" 2>&1 | tail -1 | sed "s/^/simM $1 round $2: /"
}
abL_one() {  # round 0 untimed: each tree's kernels compiled
  rm -rf "/tmp/abL_$1"
  timeout 90 python3 -m hspz run -r "$LREF" -q "$LQRY" -B 250M -o "/tmp/abL_$1" --time 2>&1 \
    | awk -F'\t' -v t="$1" -v r="$2" '
      $1 == "unit ledger:" && $2 == "ordinal" { for (i = 2; i <= NF; i++) col[$i] = i }
      $1 == "unit ledger:" && $2 ~ /^[0-9]+$/ { ms += $col["gpu_ms"]; hits += $col["hits"] }
      END { if (hits) printf "L100 %s round %s: ledger %.1f ms, %.0f hits, %.4f ns/hit, ", t, r, ms, hits, ms * 1e6 / hits }'
  echo "outputs $(cat "/tmp/abL_$1"/* 2>/dev/null | sha256sum | cut -c1-16)"
}
if has ab; then  # this code against ALT (.device/alt, `ALT=COMMIT bash benchmarks/device_files.sh`)
  each_tree 1 "${ROUNDS:-2}" ab_one | tee "$OUT/ab.log"
  python3 - "$OUT"/ab_*.jsonl <<'PY' | tee -a "$OUT/ab.log"
import json, statistics, sys
for path in sys.argv[1:]:
    timed = [r for r in map(json.loads, open(path)) if r["pass_kind"] == "timed"]
    ns = sorted(r["ns_per_hit"] for r in timed)
    wall = sorted(r["wall_s"] * 1e9 / r["hits"] for r in timed)
    print(f"{path}: {len(ns)} timed passes, ns/hit median {statistics.median(ns):.4f} "
          f"(all {' '.join(f'{x:.4f}' for x in ns)}), wall ns/hit median "
          f"{statistics.median(wall):.4f}, {timed[0]['hits']} hits, "
          f"digests {sorted({r['digest'] for r in timed})}")
PY
fi
if has abL; then
  wait "$GEN"
  read -r LREF LQRY < <(cut -f2 /tmp/l100.paths | paste -sd' ')
  each_tree 0 "${LROUNDS:-2}" abL_one | tee "$OUT/abL.log"
fi
if has L100; then
  wait "$GEN"
  cat /tmp/l100.err | tail -2
  read -r LREF LQRY < <(cut -f2 /tmp/l100.paths | paste -sd' ')
  timeout "${L_TIMEOUT:-200}" python3 benchmarks/gpu_variants.py "$LREF" "$LQRY" \
    --variants "$VARIANTS" --rounds "${LROUNDS:-2}" --passes 1 --hspz-args "-B 250M" \
    --json "$OUT/variants_L100.jsonl" 2>&1 | tee "$OUT/variants_L100.log" | grep -v "^round"
fi
