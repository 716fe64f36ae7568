#!/usr/bin/env bash
# One device call (see BENCHMARKS.md): GPU tests, then warm benchmarks of the GPU and CPU backends
# on the real bacterial pairs and the simulated large pair, and a profile of one GPU run.
# Inputs travel in .device/data (carried); logs go to $OUT.
set -uo pipefail
export PYTHONPATH=$PWD HSPZ_EXAMPLES=$PWD/.device/data PYTHONUNBUFFERED=1
D=.device/data
STAGES=${STAGES:-tests bench profile}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,memory.used --format=csv
bench() {  # name ref query backend [env...]
  local name=$1 ref=$2 qry=$3 backend=$4; shift 4
  env "$@" timeout 300 python3 -m hspz benchmark -r "$ref" -q "$qry" --backend "$backend" -t 16 \
    --warmup 1 --iterations 3 --json $OUT/bench.jsonl > /tmp/b_$name.log 2>&1
  cat /tmp/b_$name.log >> $OUT/bench.log
  echo "$name $backend $*: $(tail -1 /tmp/b_$name.log)"
}
if [[ $STAGES == *tests* ]]; then
  timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py 2>&1 | tee $OUT/gpu_tests.log | tail -5
fi
if [[ $STAGES == *bench* ]]; then
  for pair in "hpylori G27 ELS37" "ecoli MG1655-K12 DH1"; do
    set -- $pair
    bench $1_gpu_dev $D/$2.fasta.gz $D/$3.fasta.gz gpu HSPZ_DEVICE_SEEDS=1
    bench $1_gpu_cpuseed $D/$2.fasta.gz $D/$3.fasta.gz gpu HSPZ_DEVICE_SEEDS=0
    bench $1_cpu16 $D/$2.fasta.gz $D/$3.fasta.gz cpu
  done
  if [ -f $D/simM_ref.2bit ]; then
    bench simM_gpu_dev $D/simM_ref.2bit $D/simM_query.2bit gpu HSPZ_DEVICE_SEEDS=1
    bench simM_gpu_bucket $D/simM_ref.2bit $D/simM_query.2bit gpu HSPZ_DEVICE_SEEDS=1 HSPZ_REF_BUCKETS=1
  fi
fi
if [[ $STAGES == *profile* ]]; then
  python3 benchmarks/gpu_phases.py $D/simM_ref.2bit $D/simM_query.2bit --chunk 3 > $OUT/phases.txt 2>&1
  python3 benchmarks/gpu_phases.py $D/MG1655-K12.fasta.gz $D/DH1.fasta.gz --chunk 4 >> $OUT/phases.txt 2>&1
  cat $OUT/phases.txt
fi
