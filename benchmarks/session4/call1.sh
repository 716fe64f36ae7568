#!/usr/bin/env bash
# Session 4's device call 1 (BENCHMARKS.md, "Session 4"), run from the repository root:
#   run(carry=[".device"], command="bash benchmarks/session4/call1.sh")
# The GPU tests at this commit; E. coli end to end (3 runs, --time) against one lastz run; where a
# cold E. coli run spends its time: python -X importtime, a py-spy profile of every thread
# (.device/wheels holds the py-spy wheel), benchmarks/cold_start.py twice, the unit's timeline.
set -uo pipefail
export HSPZ_EXAMPLES=$PWD/.device/data PYTHONUNBUFFERED=1
D=$PWD/.device/data; LASTZ=$PWD/.device/bin/lastz
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader; nproc
lscpu | grep -E "Model name|MHz" | head -3; df -h . /tmp | tail -2
python3 -m compileall -q hspz > /dev/null
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py > $OUT/tests.log 2>&1
tail -1 $OUT/tests.log
zcat $D/MG1655-K12.fasta.gz | sed 's/^>\([^ ]*\).*/>\1/' > /tmp/mg.fa
zcat $D/DH1.fasta.gz | sed 's/^>\([^ ]*\).*/>\1/' > /tmp/dh1.fa
RUN="python3 -m hspz run -r /tmp/mg.fa -q /tmp/dh1.fa --backend gpu"
$RUN -o /tmp/w > /dev/null 2>&1   # first run on a fresh machine compiles CuPy's kernels
{
  for i in 1 2 3; do
    /usr/bin/time -f "ecoli gpu run$i wall %e s" $RUN -o /tmp/g$i --time > /tmp/e.out 2> /tmp/e.err
    grep -E "^time:|^unit ledger:	0|^digest" /tmp/e.out /tmp/e.err -h; tail -1 /tmp/e.err
  done
  /usr/bin/time -f "ecoli lastz wall %e s" $LASTZ /tmp/mg.fa /tmp/dh1.fa --nogapped \
    --format=general-:name1,start1,end1,name2,start2,end2,strand2,score > /dev/null
} 2>&1 | tee $OUT/e2e.log
python3 -X importtime -m hspz run -r /tmp/mg.fa -q /tmp/dh1.fa --backend gpu -o /tmp/i \
  2> $OUT/importtime.log > /dev/null
mkdir -p /tmp/spy && python3 -m zipfile -e .device/wheels/py_spy-*.whl /tmp/spy
SPY=$(find /tmp/spy -name py-spy -type f); chmod +x $SPY
$SPY record -r 500 --idle -t -f raw -o $OUT/spy_ecoli.txt -- $RUN -o /tmp/s 2>&1 | tail -2
{
  for i in 1 2; do python3 benchmarks/cold_start.py /tmp/mg.fa; done
  python3 benchmarks/gpu_timeline.py /tmp/mg.fa /tmp/dh1.fa --runs 3 --threads 0 --host-threads 4
} 2>&1 | tee $OUT/start.log
