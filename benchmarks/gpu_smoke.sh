#!/usr/bin/env bash
# One device call: GPU tests, then GPU vs CPU on the real bacterial pairs. Logs under $OUT.
set -uo pipefail
export PYTHONPATH=$PWD HSPZ_EXAMPLES=$PWD/.device/data PYTHONUNBUFFERED=1
D=.device/data
nvidia-smi -L
python3 -c "import numba, numpy, cupy; print('numba', numba.__version__, 'numpy', numpy.__version__, 'cupy', cupy.__version__)"
timeout 240 python3 -m pytest -q -x -p no:cacheprovider tests/test_gpu.py 2>&1 | tee $OUT/gpu_tests.log | tail -25
for pair in "G27 ELS37" "MG1655-K12 DH1"; do
  set -- $pair
  for b in gpu cpu; do
    /usr/bin/time -f "wall %e s rss %M KB" timeout 200 python3 -m hspz run -r $D/$1.fasta.gz -q $D/$2.fasta.gz \
      -o /tmp/o_$1_$b --backend $b -t 16 -y > $OUT/$1_$b.log 2>&1
    grep -E "digest|^#|wall|ledger: 0" $OUT/$1_$b.log
  done
done
