#!/usr/bin/env bash
# Claim: GPU time per seed hit on one H200 (BENCHMARKS.md, "GPU ns per seed hit").  ns/hit is the
# unit ledger's GPU time (each unit's first launch to its last event, summed over units) over
# the seed hits, so it leaves out Python's start, reading and publishing:
#   M         `hspZ benchmark` (one cold pass, one warm-up, 3 timed passes; the median timed
#             pass), ROUNDS (2) rounds, each version in turn; records in $OUT/simM_*.jsonl
#   PAIRS     (default XL: 1000 x 500 Mbp, 8 units) `hspZ run --gpus 1 -B 250M` REPEAT (3) times
#             through benchmarks/run.py (a cold process each, after one warm-up run on tiny);
#             records in $OUT/nshit.jsonl, the table in $OUT/nshit.log
# PAIRS=XXL (2000 x 1000 Mbp, 32 units) takes about 150 s a run and 150-250 s to generate: give
# it a call of its own (REPEAT=2), or two (the pair stays in $W on the warm machine).
# With ALT=.device/alt every arm runs beside the baseline package (device_env.sh).
#   bash benchmarks/device_files.sh                          # here, once (ALT=COMMIT for an A/B)
#   export OUT=$PWD/out && mkdir -p $OUT && TESTS=1 bash benchmarks/gpu_nshit.sh  # 1 GPU, repository root
# BACKEND=cpu PAIRS=tiny M=tiny runs the same steps on the CPU backend (a check of the script).
set -uo pipefail
source benchmarks/device_env.sh
BACKEND=${BACKEND:-gpu}
read -r MREF MQRY < <(python3 benchmarks/workloads.py "${M:-M}" --workdir "$W" | cut -f2 | paste -sd' ')
for round in $(seq "${ROUNDS:-2}"); do
  for dir in "$PWD" ${ALT:+"$ALT"}; do
    tag=cur; [ "$dir" != "$PWD" ] && tag=alt
    (cd "$dir" && PYTHONPATH=$dir timeout 200 python3 -m hspz benchmark -r "$MREF" -q "$MQRY" \
       --backend "$BACKEND" --warmup 1 --iterations 3 --json "$OUT/simM_$tag.jsonl" 2>&1 \
       | tail -1 | sed "s/^/simM $tag round $round: /")
  done
done | tee "$OUT/simM.log"
python3 - "$OUT"/simM_*.jsonl <<'PY' | tee -a "$OUT/simM.log"
import json, statistics, sys
for path in sys.argv[1:]:
    timed = [r for r in map(json.loads, open(path)) if r["pass_kind"] == "timed"]
    ns = sorted(r["ns_per_hit"] for r in timed)
    print(f"{path}: {len(ns)} timed passes, ns/hit median {statistics.median(ns):.4f} "
          f"(all {' '.join(f'{x:.4f}' for x in ns)}), {timed[0]['hits']} hits, "
          f"digests {sorted({r['digest'] for r in timed})}")
PY
ARMS=gpu; [ "$BACKEND" = cpu ] && ARMS=cpuN
python3 benchmarks/run.py ${PAIRS:-XL} --arms "$ARMS" --hspz-args "-B 250M" \
  --repeat "${REPEAT:-3}" "${ALT_ARGS[@]}" --workdir "$W" --machine "$MACHINE" \
  --json "$OUT/nshit.jsonl" 2>&1 | tee "$OUT/nshit.log"
