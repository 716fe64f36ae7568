#!/usr/bin/env bash
# Session 3's device call 5 (BENCHMARKS.md, "Session 3"), run from the repository root:
#   run(carry=[".device"], command="bash benchmarks/session3/call5.sh")
# .device/ (not versioned) holds the inputs (data/), lastz (bin/) and the versions compared,
# each made by `git archive COMMIT hspz | tar -x -C .device/NAME`: prev=3334caa, mid=8db1591,
# alt=1e5dc7e, g23 and g24 = 724e8cb with GROUP_BASES 1 << 23 or 1 << 24, early = 1e5dc7e
# with .device/early_pool.patch.
# two-GPU scaling with a larger query; ALT = HEAD with early_pool.patch
QUERY_MBP=300 REPEAT=2 ALT=$PWD/.device/early bash benchmarks/gpus_scaling.sh
