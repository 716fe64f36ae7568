#!/usr/bin/env bash
# Session 5's device call 1 (BENCHMARKS.md, "Session 5"), run from the repository root:
#   run(carry=[".device"], command="bash benchmarks/session5/call1.sh")
# The GPU tests (with the review's GPU edits, 7a5f579); where a cold E. coli run's process wall
# goes (stages.py, with a bytecode cache and as the device gives Python; a py-spy speedscope
# timeline of one run); simM with this code, with the host-thread release after the last
# launch removed (.device/norel, 57198ea undone) and session 3's code (.device/s3), alternating.
source benchmarks/session4/common.sh 240
python3 -m compileall -q .device/norel/hspz > /dev/null
{
  echo "== bytecode cache"; pyc python3 benchmarks/session5/stages.py /tmp/mg.fa /tmp/dh1.fa 5
  echo "== as given"; python3 benchmarks/session5/stages.py /tmp/mg.fa /tmp/dh1.fa 3
} 2>&1 | tee $OUT/stages.log
spy
pyc $SPY record -r 1000 --idle -t -f speedscope -o $OUT/spy_ecoli.json -- python3 -m hspz run \
  $ARGS -o /tmp/sp 2>&1 | tail -1
NOREL=$PWD/.device/norel
for i in 1 2; do
  for v in CUR NOREL S3; do
    simm $v ${!v} pyc
  done
done 2>&1 | tee $OUT/simm.log
