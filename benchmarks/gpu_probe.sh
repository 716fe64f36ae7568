#!/usr/bin/env bash
# A short device call for tuning (BENCHMARKS.md, "reference order"): the GPU tests, the phases of
# one simulated-M batch at each reference-order window, M's benchmark with the order on and off,
# and where the E. coli process spends its time (imports, --time).  Logs under $OUT.
#   run(carry=[".device"], command="bash benchmarks/gpu_probe.sh")
set -uo pipefail
export PYTHONPATH=$PWD HSPZ_EXAMPLES=$PWD/.device/data PYTHONUNBUFFERED=1
D=.device/data
STAGES=${STAGES:-tests phases bench ecoli}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
if [[ $STAGES == *tests* ]]; then
  timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py > $OUT/tests.log 2>&1
  tail -3 $OUT/tests.log
fi
if [[ $STAGES == *phases* ]]; then
  timeout 200 python3 benchmarks/gpu_phases.py $D/simM_ref.2bit $D/simM_query.2bit --chunk 3 \
    --repeat 4 ${SHIFTS:+--shifts $SHIFTS} 2>&1 | tee $OUT/phases.log
  for caps in "48 1024" "96 1024" "64 256"; do
    set -- $caps
    timeout 200 python3 benchmarks/gpu_phases.py $D/simM_ref.2bit $D/simM_query.2bit --chunk 3 \
      --repeat 4 --shifts none --cap $1 --cap2 $2 2>&1 | tee -a $OUT/phases.log
  done
fi
if [[ $STAGES == *bench* ]]; then
  for s in "HSPZ_REF_BUCKETS=0" "HSPZ_REF_BUCKETS=auto"; do
    env $s timeout 200 python3 -m hspz benchmark -r $D/simM_ref.2bit -q $D/simM_query.2bit \
      --backend gpu --warmup 1 --iterations 3 --json $OUT/bench.jsonl 2>&1 | tail -1 | sed "s/^/simM $s: /"
  done | tee $OUT/bench.log
fi
if [[ $STAGES == *ecoli* ]]; then
  python3 -m compileall -q hspz > /dev/null  # the device sets PYTHONDONTWRITEBYTECODE
  zcat $D/MG1655-K12.fasta.gz > /tmp/mg.fa; zcat $D/DH1.fasta.gz > /tmp/dh1.fa
  python3 -c "import cupy, sys; print(cupy.__file__, sys.flags.dont_write_bytecode)" > $OUT/pyc.log 2>&1
  ls "$(python3 -c 'import cupy, os; print(os.path.dirname(cupy.__file__))')/__pycache__" 2>&1 | head -3 >> $OUT/pyc.log
  env | grep -i python >> $OUT/pyc.log
  python3 -m hspz run -r /tmp/mg.fa -q /tmp/dh1.fa -o /tmp/warm --backend gpu > /dev/null 2>&1
  {
    for i in 1 2 3; do
      /usr/bin/time -f "ecoli gpu wall %e s" python3 -m hspz run -r /tmp/mg.fa -q /tmp/dh1.fa \
        -o /tmp/e$i --backend gpu --time 2>&1 | grep -E "^time:|wall|^digest|^unit ledger"
    done
    python3 -X importtime -m hspz run -r /tmp/mg.fa -q /tmp/dh1.fa -o /tmp/e4 --backend gpu 2>&1 \
      | grep "import time" | sort -t'|' -k2 -n | tail -12
    python3 -m cProfile -s cumtime -m hspz run -r /tmp/mg.fa -q /tmp/dh1.fa -o /tmp/e5 \
      --backend gpu 2>&1 | head -60
  } > $OUT/ecoli.log 2>&1
  grep -E "wall|digest" $OUT/ecoli.log
fi
