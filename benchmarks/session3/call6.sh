#!/usr/bin/env bash
# Session 3's device call 6 (BENCHMARKS.md, "Session 3"), run from the repository root:
#   run(carry=[".device"], command="bash benchmarks/session3/call6.sh")
# .device/ (not versioned) holds the inputs (data/), lastz (bin/) and the versions compared,
# each made by `git archive COMMIT hspz | tar -x -C .device/NAME`: prev=3334caa, mid=8db1591,
# alt=1e5dc7e, g23 and g24 = 724e8cb with GROUP_BASES 1 << 23 or 1 << 24, early = 1e5dc7e
# with .device/early_pool.patch.
export PYTHONUNBUFFERED=1
D=$PWD/.device/data; CUR=$PWD
LASTZ_RUNS=1 bash benchmarks/gpu_issue3.sh 2>&1 | grep -v "^  " | tail -40
export PYTHONPATH=$CUR
for sw in 5 0.5; do for t in 4 16; do python3 benchmarks/gpu_timeline.py $D/simM_ref.2bit $D/simM_query.2bit --runs 3 --threads 0 --host-threads $t --switch-ms $sw --quiet 2>&1 | sed "s/^/simM /"; done; done | tee $OUT/timeline.log
for t in 4 16; do python3 benchmarks/gpu_timeline.py /tmp/mg.fa /tmp/dh1.fa --runs 3 --threads 0 --host-threads $t --quiet 2>&1 | sed "s/^/ecoli /"; done | tee -a $OUT/timeline.log
