#!/usr/bin/env bash
# Session 5's device call 2 (BENCHMARKS.md, "Session 5"), on nvidia-h200-x2, from the repository root:
#   run(kind="nvidia-h200-x2", carry=[".device"], command="bash benchmarks/session5/call2.sh")
# .device/s4 = `git archive 3e33fab hspz` (session 4's last code).  The GPU tests; which call
# first imports cupyx (cupyx_probe.py); stages.py with a bytecode cache; E. coli end to end, this
# code and s4 alternating, 5 runs each after a warm run, with a bytecode cache and as the device
# gives Python; 3 lastz runs.
source benchmarks/session4/common.sh 200
S4=$PWD/.device/s4
python3 -m compileall -q $S4/hspz > /dev/null
PYTHONPATH=$CUR pyc python3 benchmarks/session5/cupyx_probe.py /tmp/mg.fa /tmp/dh1.fa 2>&1 | tail -40 > $OUT/probe.log
pyc python3 benchmarks/session5/stages.py /tmp/mg.fa /tmp/dh1.fa 3 2>&1 | tee $OUT/stages.log
{
  pyc_pairs cur $CUR s4 $S4 5
  for i in 1 2 3 4 5; do run "cur run$i" $CUR /tmp/c$i; run "s4 run$i" $S4 /tmp/s$i; done
  lastz_runs 3
  sha256sum /tmp/c1/* /tmp/p1/* /tmp/q1/* /tmp/s1/* | sed 's|/tmp/[cpqs]1/||' | sort | uniq -c
} 2>&1 | tee $OUT/e2e.log
