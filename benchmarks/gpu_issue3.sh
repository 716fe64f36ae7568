#!/usr/bin/env bash
# Issue 3's figures in one device call (BENCHMARKS.md): the GPU tests; simulated M with this code
# and the previous version side by side; E. coli end to end with this code, the previous version,
# the CPU backend on all cores and lastz --nogapped (one core); the phases of one M batch.
# The previous version is `git archive 3334caa hspz | tar -x -C .device/prev` (session 2's last).
#   run(carry=[".device"], command="bash benchmarks/gpu_issue3.sh")
# LASTZ_RUNS=0 leaves lastz out (18 s a run); NCU=1 adds an Nsight Compute profile of first_pass.
set -uo pipefail
export HSPZ_EXAMPLES=$PWD/.device/data PYTHONUNBUFFERED=1
D=$PWD/.device/data
LASTZ=$PWD/.device/bin/lastz
CUR=$PWD
PREV=$PWD/.device/prev
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader; nproc
# The device sets PYTHONDONTWRITEBYTECODE; an installed package has its .pyc files.
python3 -m compileall -q hspz $PREV/hspz > /dev/null
PYTHONPATH=$CUR timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py \
  > $OUT/tests.log 2>&1
tail -1 $OUT/tests.log
{
  for v in CUR PREV; do  # python -m imports from the working directory
    cd ${!v}; PYTHONPATH=${!v} timeout 200 python3 -m hspz benchmark -r $D/simM_ref.2bit \
      -q $D/simM_query.2bit --backend gpu --warmup 1 --iterations 3 --json $OUT/bench.jsonl 2>&1 \
      | tail -1 | sed "s/^/simM $v: /"
  done
  cd $CUR
} | tee $OUT/bench.log
zcat $D/MG1655-K12.fasta.gz | sed 's/^>\([^ ]*\).*/>\1/' > /tmp/mg.fa
zcat $D/DH1.fasta.gz | sed 's/^>\([^ ]*\).*/>\1/' > /tmp/dh1.fa
e2e() {  # label command...
  local label=$1; shift
  for i in 1 2 3; do
    /usr/bin/time -f "$label run$i wall %e s rss %M KB" "$@" > /tmp/e2e.out 2> /tmp/e2e.err
    tail -1 /tmp/e2e.err
    grep -h "^digest" /tmp/e2e.out /tmp/e2e.err | head -1
  done
}
{
  PYTHONPATH=$CUR python3 -m hspz run -r /tmp/mg.fa -q /tmp/dh1.fa -o /tmp/w --backend gpu > /dev/null 2>&1
  (cd $PREV; PYTHONPATH=$PREV python3 -m hspz run -r /tmp/mg.fa -q /tmp/dh1.fa -o /tmp/w --backend gpu > /dev/null 2>&1)
  (export PYTHONPATH=$CUR; e2e "ecoli hspZ-gpu" python3 -m hspz run -r /tmp/mg.fa -q /tmp/dh1.fa -o /tmp/g --backend gpu)
  (cd $PREV; export PYTHONPATH=$PREV; e2e "ecoli hspZ-gpu-prev" python3 -m hspz run -r /tmp/mg.fa -q /tmp/dh1.fa -o /tmp/p --backend gpu)
  (export PYTHONPATH=$CUR; e2e "ecoli hspZ-cpu-all" python3 -m hspz run -r /tmp/mg.fa -q /tmp/dh1.fa -o /tmp/c --backend cpu)
  [ "${LASTZ_RUNS:-1}" = 0 ] || e2e "ecoli lastz" $LASTZ /tmp/mg.fa /tmp/dh1.fa --nogapped \
    --format=general-:name1,start1,end1,name2,start2,end2,strand2,score
  PYTHONPATH=$CUR python3 -m hspz run -r /tmp/mg.fa -q /tmp/dh1.fa -o /tmp/t --backend gpu --time 2>&1 \
    | grep -E "^time:|^unit ledger"
} 2>&1 | tee $OUT/e2e.log
PYTHONPATH=$CUR timeout 200 python3 benchmarks/gpu_phases.py $D/simM_ref.2bit $D/simM_query.2bit \
  --chunk 3 --repeat 4 --shifts none 2>&1 | tee $OUT/phases.log
if [ "${NCU:-0}" = 1 ] && command -v ncu > /dev/null; then
  PYTHONPATH=$CUR timeout 150 ncu -k regex:first_pass -c 1 --section SpeedOfLight --section Occupancy \
    --section WarpStateStats --section MemoryWorkloadAnalysis python3 benchmarks/gpu_phases.py \
    $D/simM_ref.2bit $D/simM_query.2bit --chunk 3 --repeat 1 --shifts none > $OUT/ncu.log 2>&1
  grep -E "Duration|Throughput|Occupancy|Registers|Stall|Issue|Hit Rate" $OUT/ncu.log | head -30
fi
