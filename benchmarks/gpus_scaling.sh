#!/usr/bin/env bash
# --gpus 1 vs --gpus 2 on a workload whose units are long (issue 4): a simulated REF_MBP (default
# 500) x QUERY_MBP (default 80) pair (divergence 0.4), generated on the device, -B BIN (default
# 125M: 4 reference bins of 500 Mbp).  The generated pair stays in /tmp: a later call on the same
# warm machine reuses it.  Logs under $OUT, named with TAG.
#
# Arms run in the order ARMS gives (default "1 2", with ALT "1 2 alt1 alt2"), REPEAT times (1):
#   1, 2     --gpus 1, --gpus 2
#   d1       --gpus 1 with only device 1 visible (is one device slower than the other?)
#   alt1/2   --gpus 1/2 with the hspz package in ALT=DIR (another version, side by side)
# PYC=1 gives every process a bytecode cache (the device sets PYTHONDONTWRITEBYTECODE and its numpy
# ships no .pyc, so each process compiles numpy from source otherwise).  SMI=1 samples every GPU's
# clocks, power, temperature, load and clock-event reasons (nvidia-smi, 500 ms) into
# $OUT/${TAG}smi.csv and the host's CPU (vmstat, 2 s) into $OUT/${TAG}vmstat.log, with each arm's
# start and end in $OUT/${TAG}marks.log.  DEADLINE=S skips an arm that would end more than S
# seconds after the script started (an arm is assumed to take NEED1=170 s at one GPU, NEED2=100 s
# at two).
#   run(kind="nvidia-h200-x2", carry=[".device"], command="QUERY_MBP=300 bash benchmarks/gpus_scaling.sh")
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T0=$(date +%s)
TAG=${TAG:-}
if [ "${PYC:-0}" = 1 ]; then unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc; fi
nvidia-smi -L
mark() { echo "$(date +%s.%N | cut -c1-14) $(date +%T) $*" >> $OUT/${TAG}marks.log; }
if [ "${SMI:-0}" = 1 ]; then
  nvidia-smi -q -d POWER,CLOCK,PERFORMANCE,TEMPERATURE > $OUT/${TAG}smi_q.txt 2>&1
  (nproc; cat /proc/loadavg; nvidia-smi topo -m) >> $OUT/${TAG}smi_q.txt 2>&1
  Q=timestamp,index,clocks.sm,clocks.mem,power.draw,temperature.gpu,temperature.memory
  Q=$Q,utilization.gpu,utilization.memory,clocks_event_reasons.active,pstate
  nvidia-smi --query-gpu=$Q --format=csv -lms 500 > $OUT/${TAG}smi.csv 2>&1 &
  vmstat -t 2 > $OUT/${TAG}vmstat.log 2>&1 &
  trap 'kill $(jobs -p) 2>/dev/null' EXIT
fi
python3 -m compileall -q hspz > /dev/null  # the device sets PYTHONDONTWRITEBYTECODE
export REF_MBP=${REF_MBP:-500} QUERY_MBP=${QUERY_MBP:-80}
PAIR=/tmp/big_${REF_MBP}x${QUERY_MBP}  # a warm machine's next call reuses the pair of this size
STAMP=$PAIR.done
mark generate
[ -f $STAMP ] && echo "reusing the generated pair ($STAMP)" || PAIR=$PAIR python3 - <<'PY' && touch $STAMP
import os, time
from benchmarks.simulate import PairSpec, write_pair_2bit
t = time.time()
write_pair_2bit(PairSpec(ref_mbp=float(os.environ["REF_MBP"]), query_mbp=float(os.environ["QUERY_MBP"]),
                         chromosomes=8, divergence=0.4, seed=3),
                os.environ["PAIR"] + "_ref.2bit", os.environ["PAIR"] + "_qry.2bit")
print(f"generated in {time.time() - t:.1f} s")
PY
mark warm
cat ${PAIR}_ref.2bit ${PAIR}_qry.2bit > /dev/null  # in the page cache for every arm, the first too
python3 -m hspz run -r .device/data/pseudopig.fa.gz -q .device/data/pseudocat.fa.gz -o /tmp/w --backend gpu > /dev/null 2>&1  # kernels compiled and cached
F="-r ${PAIR}_ref.2bit -q ${PAIR}_qry.2bit -B ${BIN:-125M} --backend gpu"
[ -z "${ARMS:-}" ] && { ARMS="1 2"; [ -n "${ALT:-}" ] && ARMS="1 2 alt1 alt2"; }
[ -n "${ALT:-}" ] && python3 -m compileall -q $ALT/hspz > /dev/null
for arm in $(for i in $(seq ${REPEAT:-1}); do echo $ARMS; done); do
  g=${arm#alt}; g=${g#d}; path=$PWD; [ ${arm#alt} != $arm ] && path=$ALT
  visible=${CUDA_VISIBLE_DEVICES-all}; [ ${arm#d} != $arm ] && visible=${arm#d}
  need=${NEED1:-170}; [ $g = 2 ] && need=${NEED2:-100}
  if [ -n "${DEADLINE:-}" ] && [ $(( $(date +%s) - T0 + need )) -gt $DEADLINE ]; then
    echo "arm $arm skipped: $(( $(date +%s) - T0 )) s gone of $DEADLINE"; continue
  fi
  mark "start $arm"
  (cd $path; [ $visible != all ] && export CUDA_VISIBLE_DEVICES=$visible
   PYTHONPATH=$path /usr/bin/time -f "gpus=$g ($arm) wall %e s user %U s sys %S s" timeout 280 \
     python3 -m hspz run $F -o /tmp/g$arm --gpus $g -y --time > /tmp/gpus$arm.log 2>&1)
  mark "end $arm"
  grep -E "^schedule:|^lifecycle|^digest|wall|finished at|^#seed hits|^time: workers" /tmp/gpus$arm.log
  grep -E "^unit ledger:	[0-9]" /tmp/gpus$arm.log | cut -f2-4,9-11
  cat /tmp/gpus$arm.log >> $OUT/${TAG}runs.log
done 2>&1 | tee $OUT/${TAG}scaling.log
