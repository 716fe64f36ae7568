#!/usr/bin/env bash
# Session 3's device call 10 (BENCHMARKS.md, "Session 3"), run from the repository root:
#   run(carry=[".device"], command="bash benchmarks/session3/call10.sh")
# .device/ (not versioned) holds the inputs (data/), lastz (bin/) and the versions compared,
# each made by `git archive COMMIT hspz | tar -x -C .device/NAME`: prev=3334caa, mid=8db1591,
# alt=1e5dc7e, g23 and g24 = 724e8cb with GROUP_BASES 1 << 23 or 1 << 24, early = 1e5dc7e
# with .device/early_pool.patch.
export PYTHONUNBUFFERED=1
D=$PWD/.device/data; CUR=$PWD
python3 -m compileall -q hspz .device/g23/hspz .device/g24/hspz > /dev/null
export PYTHONPATH=$CUR
for g in 4194304 8388608 16777216; do python3 benchmarks/gpu_timeline.py $D/simM_ref.2bit $D/simM_query.2bit --runs 3 --threads 0 --quiet --group-bases $g 2>&1; done | tee $OUT/timeline.log
for v in $CUR $PWD/.device/g23 $PWD/.device/g24; do
  (cd $v; PYTHONPATH=$v timeout 100 python3 -m hspz benchmark -r $D/simM_ref.2bit -q $D/simM_query.2bit --backend gpu --warmup 1 --iterations 3 --json $OUT/bench.jsonl 2>&1 | tail -1 | sed "s|^|simM $(basename $v): |")
done | tee $OUT/bench.log
