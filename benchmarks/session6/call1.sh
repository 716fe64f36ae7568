#!/usr/bin/env bash
# Session 6's device call 1 (BENCHMARKS.md, "Session 6"), on nvidia-h200, from the repository root:
#   run(kind="nvidia-h200", carry=[".device"], command="bash benchmarks/session6/call1.sh")
# .device/s5 = `git archive 7c3ae72 hspz` (session 5's last code, numba on the GPU path).  The
# GPU tests; E. coli end to end, this code and s5 alternating, 5 runs each after a warm run, with
# a bytecode cache and as the device gives Python; 3 lastz runs; simM, both versions, two rounds.
source benchmarks/session4/common.sh 300
S5=$PWD/.device/s5
python3 -m compileall -q $S5/hspz > /dev/null
{
  pyc_pairs cur $CUR s5 $S5 5
  run warm-cur $CUR /tmp/w1 > /dev/null; run warm-s5 $S5 /tmp/w2 > /dev/null
  for i in 1 2 3 4 5; do run "cur run$i" $CUR /tmp/c$i; run "s5 run$i" $S5 /tmp/s$i; done
  lastz_runs 3
  sha256sum /tmp/c1/* /tmp/p1/* /tmp/q1/* /tmp/s1/* | sed 's|/tmp/[cpqs]1/||' | sort | uniq -c
} 2>&1 | tee $OUT/e2e.log
for i in 1 2; do simm cur $CUR pyc; simm s5 $S5 pyc; done 2>&1 | tee $OUT/simm.log
