#!/usr/bin/env bash
# Session 4's device call 5 (BENCHMARKS.md, "Session 4"), on nvidia-h200-x2, from the repository root:
#   run(kind="nvidia-h200-x2", carry=[".device"], command="bash benchmarks/session4/call5.sh")
# .device/s3 = `git archive 9dcec21 hspz` (session 3's last code).  The GPU tests at this commit;
# E. coli end to end: this code as the device gives Python (no bytecode cache), this code and s3
# with a bytecode cache (PYTHONPYCACHEPREFIX), 5 runs each after a warm run, and 3 lastz runs;
# then --gpus 1 and --gpus 2, this code and s3, on 500 x 300 Mbp (-B 125M, 12 units), PYC=1.
source benchmarks/session4/common.sh 200
{
  run warm-cur $CUR /tmp/w1 > /dev/null
  for i in 1 2 3 4 5; do run "cur run$i" $CUR /tmp/c$i; done
  pyc_pairs cur $CUR s3 $S3 5
  lastz_runs 3
  sha256sum /tmp/c1/* /tmp/p1/* /tmp/q1/* | sed 's|/tmp/[cpq]1/||' | sort | uniq -c
} 2>&1 | tee $OUT/e2e.log
PYC=1 QUERY_MBP=300 ALT=$S3 TAG=q300_ bash benchmarks/gpus_scaling.sh
