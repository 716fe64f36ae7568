# Sourced by session 4's device calls 2, 3 and 5 and session 5's calls 1 and 2: the GPU tests (log
# in $OUT/tests.log, timeout $1 seconds), the E. coli pair as /tmp/mg.fa and /tmp/dh1.fa, and
#   run LABEL DIR OUT-DIR  one `hspZ run` of E. coli with the hspz package in DIR: wall, digest,
#                          --time's phases and the unit's ledger row, lines prefixed with LABEL
#   pyc COMMAND...         COMMAND with a bytecode cache (PYTHONPYCACHEPREFIX)
#   pyc_pairs A DIR_A B DIR_B N   a warm run of each, then N runs of each, alternating, all
#                          with a bytecode cache (labels "A+pyc runI", outputs /tmp/pI, /tmp/qI)
#   lastz_runs N           N timed lastz --nogapped runs of E. coli
#   spy                    unpacks the py-spy wheel carried in .device/wheels; sets SPY
#   simm LABEL DIR [PREFIX...]  `hspZ benchmark` of simM (3 timed passes) with the hspz package
#                          in DIR, PREFIX (e.g. pyc) before python3; its summary line
# .device/s3 = `git archive 9dcec21 hspz` (session 3's last code).
set -uo pipefail
export HSPZ_EXAMPLES=$PWD/.device/data PYTHONUNBUFFERED=1
D=$PWD/.device/data; LASTZ=$PWD/.device/bin/lastz; CUR=$PWD; S3=$PWD/.device/s3
python3 -m compileall -q hspz $S3/hspz > /dev/null
timeout "$1" python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py > $OUT/tests.log 2>&1
tail -1 $OUT/tests.log
zcat $D/MG1655-K12.fasta.gz | sed 's/^>\([^ ]*\).*/>\1/' > /tmp/mg.fa
zcat $D/DH1.fasta.gz | sed 's/^>\([^ ]*\).*/>\1/' > /tmp/dh1.fa
export ARGS="-r /tmp/mg.fa -q /tmp/dh1.fa --backend gpu"
run() {
  (cd $2; PYTHONPATH=$2 /usr/bin/time -f "$1 wall %e s" python3 -m hspz run $ARGS -o $3 --time \
    > /tmp/e.out 2> /tmp/e.err; grep -h "^digest" /tmp/e.out /tmp/e.err; tail -1 /tmp/e.err;
   grep -hE "^time: (input|plan|workers|wall|workers: reference)|^unit ledger:	0" /tmp/e.err /tmp/e.out \
     | tr '\t' ' ' | sed "s/^/  $1 /")
}
export -f run
pyc() { env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=/tmp/pyc "$@"; }
pyc_pairs() {
  export -f run pyc; export ARGS
  pyc bash -c 'run warm-$0 $1 /tmp/w3; run warm-$2 $3 /tmp/w4' "$1" "$2" "$3" "$4" > /dev/null
  for i in $(seq "$5"); do
    pyc bash -c 'run "$0+pyc run$4" $1 /tmp/p$4; run "$2+pyc run$4" $3 /tmp/q$4' \
      "$1" "$2" "$3" "$4" "$i"
  done
}
lastz_runs() {
  for i in $(seq "$1"); do
    /usr/bin/time -f "lastz run$i wall %e s" $LASTZ /tmp/mg.fa /tmp/dh1.fa --nogapped \
      --format=general-:name1,start1,end1,name2,start2,end2,strand2,score > /tmp/lz.out
  done
}
spy() {
  mkdir -p /tmp/spy && python3 -m zipfile -e .device/wheels/py_spy-*.whl /tmp/spy
  SPY=$(find /tmp/spy -name py-spy -type f); chmod +x $SPY
}
simm() {
  local label=$1 dir=$2; shift 2
  (cd $dir; PYTHONPATH=$dir "$@" timeout 200 python3 -m hspz benchmark -r $D/simM_ref.2bit \
    -q $D/simM_query.2bit --backend gpu --warmup 1 --iterations 3 2>&1 | tail -1 | sed "s/^/simM $label: /")
}
