#!/usr/bin/env bash
# Session 4's device call 2 (BENCHMARKS.md, "Session 4"), run from the repository root:
#   run(carry=[".device"], command="bash benchmarks/session4/call2.sh")
# .device/s3 = `git archive 9dcec21 hspz` (session 3's last code).  The GPU tests; E. coli end to
# end, this code and s3 alternating (5 runs each after a warm run) against 3 lastz runs; where a
# run's time goes now (importtime, py-spy, cold_start.py, the unit's timeline); simM, this code
# against s3 (hspZ benchmark, 3 timed passes each).
source benchmarks/session4/common.sh 240
{
  run warm-cur $CUR /tmp/w1 > /dev/null; run warm-s3 $S3 /tmp/w2 > /dev/null
  for i in 1 2 3 4 5; do run "cur run$i" $CUR /tmp/c$i; run "s3 run$i" $S3 /tmp/s$i; done
  lastz_runs 3
  sha256sum /tmp/c1/* /tmp/s1/* 2>/dev/null | sed 's|/tmp/[cs]1/||' | sort | uniq -c | head
} 2>&1 | tee $OUT/e2e.log
export PYTHONPATH=$CUR
python3 -X importtime -m hspz run $ARGS -o /tmp/i 2> $OUT/importtime.log > /dev/null
spy
$SPY record -r 250 --idle -t -f raw -o $OUT/spy_ecoli.txt -- python3 -m hspz run $ARGS -o /tmp/sp 2>&1 | tail -1
{
  for i in 1 2; do python3 benchmarks/cold_start.py /tmp/mg.fa; done
  for t in 4 16; do python3 benchmarks/gpu_timeline.py /tmp/mg.fa /tmp/dh1.fa --runs 3 --threads 0 --host-threads $t; done
  simm CUR $CUR; simm S3 $S3
} 2>&1 | tee $OUT/start.log
