#!/usr/bin/env bash
# Session 8's device call 5, on a fresh nvidia-h200-x2: the worker processes' exit no longer
# waited for before publishing (the pool joins them at the end of the run), against the code of
# calls 1-4 (ALT = .device/s8a, commit 1077460), on the simulated 1000 x 500 Mbp pair, -B 250M
# (8 units): arms alt2 (the first run of that copy: numba compiles its cache), then 2, alt2, 1,
# 2, alt2, 1, 2; then one `--gpus 2` timeline of each version
# (benchmarks/workers_timeline.py: records shared, each unit's arrival and staging, digest
# merges, publish, the pool's close) in $OUT/timeline_new.log and timeline_alt.log:
#   run(kind="nvidia-h200-x2", carry=[".device"], command="bash benchmarks/session8/call5.sh")
T0=$(date +%s)
REF_MBP=1000 QUERY_MBP=500 BIN=250M PYC=1 SMI=1 ALT=$PWD/.device/s8a ARMS=${ARMS:-alt2 2 alt2 1 2 alt2 1 2} \
  DEADLINE=$(( ${DEADLINE:-345} - $(date +%s) + T0 )) NEED1=45 NEED2=28 \
  bash benchmarks/gpus_scaling.sh
export PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=/tmp/pyc
unset PYTHONDONTWRITEBYTECODE
F="-r /tmp/big_1000x500_ref.2bit -q /tmp/big_1000x500_qry.2bit -B 250M --backend gpu --gpus 2 -y"
for v in new alt; do
  [ $(( $(date +%s) - T0 + 30 )) -gt ${TIMELINE_DEADLINE:-400} ] && { echo "timeline $v skipped"; continue; }
  path=$PWD; [ $v = alt ] && path=$PWD/.device/s8a
  PYTHONPATH=$path timeout 60 python3 benchmarks/workers_timeline.py $F -o /tmp/tl_$v \
    > $OUT/timeline_$v.log 2>&1
  grep -E "^timeline:|^digest" $OUT/timeline_$v.log | grep -v "staged\|sealed"
done
