#!/usr/bin/env bash
# Device call 2 of the index, batch and workflow claims (the pair is made again on a fresh
# machine: a warm one is not to be counted on): the batch of 20 x 5 Mbp run batched without and with the index against
# separate runs, then the same batch through the Snakemake workflow (local profile, one GPU,
# workers 1, index true) against `hspZ run --query-list --index` (carried snakemake wheels):
#   export OUT=$PWD/out && mkdir -p $OUT && bash benchmarks/index_batch_2.sh  # 1 GPU, repository root
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=/tmp/pyc
[ -f /tmp/ib/list.txt ] && [ -f /tmp/ib/ix/READY ] || timeout 120 python3 benchmarks/index_batch.py \
  --work /tmp/ib --out $OUT --steps gen,index > $OUT/ib0.log 2>&1
timeout 300 python3 benchmarks/index_batch.py --work /tmp/ib --out $OUT --steps batch \
  --batch-runs 2 > $OUT/ib2.log 2>&1
tail -8 $OUT/ib2.log
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
  .whl/*.whl > $OUT/pip.log 2>&1 && export PYTHONPATH=$PWD:/tmp/site
mkdir -p /tmp/bin && printf '#!/bin/sh\nexec python3 -m hspz "$@"\n' > /tmp/bin/hspZ \
  && chmod +x /tmp/bin/hspZ && export PATH=/tmp/bin:$PATH
timeout 200 python3 benchmarks/workflow_overhead.py --work /tmp/ib --out $OUT --runs 2 \
  > $OUT/wf.log 2>&1
tail -8 $OUT/wf.log
