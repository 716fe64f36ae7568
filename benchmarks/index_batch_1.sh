#!/usr/bin/env bash
# Device call 1 of the index and batch claims (BENCHMARKS.md, "The reference index"): the GPU
# tests, then a simulated 1 Gbp reference (25 records) and 20 queries of 5 Mbp, its index, the
# per-bin loads and separate 5 Mbp runs with and without the index (5 per arm, interleaved):
#   export OUT=$PWD/out && mkdir -p $OUT && bash benchmarks/index_batch_1.sh  # 1 GPU, repository root
# Outputs under $OUT; the pair stays in /tmp/ib for call 2 on the warm machine.
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=/tmp/pyc
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv | tee $OUT/gpu.txt
(time timeout 330 python3 -m pytest -q -x -p no:cacheprovider tests/test_gpu.py) \
  > $OUT/gpu_tests.log 2>&1; tail -4 $OUT/gpu_tests.log
timeout 420 python3 benchmarks/index_batch.py --work /tmp/ib --out $OUT \
  --steps gen,index,loads,single --runs 5 > $OUT/ib1.log 2>&1
tail -12 $OUT/ib1.log
