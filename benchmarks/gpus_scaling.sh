#!/usr/bin/env bash
# --gpus 1 vs --gpus 2 on a workload whose units are long (issue 4): a simulated REF_MBP (default
# 500) x QUERY_MBP (default 80) pair (divergence 0.4), generated on the device, -B BIN (default
# 125M: 4 reference bins of 500 Mbp); REPEAT (default 1) runs per arm, alternating.  ALT=DIR adds two arms: --gpus 1 and --gpus 2
# with the hspz package in DIR (another version, side by side).  PYC=1 gives every process a bytecode
# cache (the device sets PYTHONDONTWRITEBYTECODE and its numpy ships no .pyc, so each process
# compiles numpy from source otherwise).  Logs under $OUT, named with TAG.  The generated pair stays in
# /tmp: a later call on the same warm machine reuses it.
#   run(kind="nvidia-h200-x2", carry=[".device"], command="QUERY_MBP=300 bash benchmarks/gpus_scaling.sh")
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
TAG=${TAG:-}
if [ "${PYC:-0}" = 1 ]; then unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc; fi
nvidia-smi -L
python3 -m compileall -q hspz > /dev/null  # the device sets PYTHONDONTWRITEBYTECODE
export REF_MBP=${REF_MBP:-500} QUERY_MBP=${QUERY_MBP:-80}
STAMP=/tmp/big_${REF_MBP}x${QUERY_MBP}.done  # a warm machine's next call reuses the pair
[ -f $STAMP ] && echo "reusing the generated pair ($STAMP)" || python3 - <<'PY' && touch $STAMP
import os, time
from benchmarks.simulate import PairSpec, simulate_pair
from hspz.sequence import Record, write_2bit
t = time.time()
ref, qry = simulate_pair(PairSpec(ref_mbp=float(os.environ["REF_MBP"]), query_mbp=float(os.environ["QUERY_MBP"]),
                                  chromosomes=8, divergence=0.4, seed=3))
write_2bit("/tmp/big_ref.2bit", [Record(n, s) for n, s in ref])
write_2bit("/tmp/big_qry.2bit", [Record(n, s) for n, s in qry])
print(f"generated in {time.time() - t:.1f} s:", len(ref), "ref records,", len(qry), "query records")
PY
python3 -m hspz run -r .device/data/pseudopig.fa.gz -q .device/data/pseudocat.fa.gz -o /tmp/w --backend gpu > /dev/null 2>&1  # kernels compiled and cached
F="-r /tmp/big_ref.2bit -q /tmp/big_qry.2bit -B ${BIN:-125M} --backend gpu"
ARMS="1 2"; [ -n "${ALT:-}" ] && ARMS="1 2 alt1 alt2"
[ -n "${ALT:-}" ] && python3 -m compileall -q $ALT/hspz > /dev/null
for arm in $(for i in $(seq ${REPEAT:-1}); do echo $ARMS; done); do
  g=${arm#alt}; path=$PWD; [ $arm != $g ] && path=$ALT
  (cd $path; PYTHONPATH=$path /usr/bin/time -f "gpus=$g ($arm) wall %e s" timeout 280 python3 -m hspz run \
    $F -o /tmp/g$arm --gpus $g -y --time > /tmp/gpus$arm.log 2>&1)
  g=$arm
  grep -E "^schedule:|^lifecycle|^digest|wall|finished at|^#seed hits|^time: workers" /tmp/gpus$g.log
  cat /tmp/gpus$g.log >> $OUT/${TAG}runs.log
done 2>&1 | tee $OUT/${TAG}scaling.log
