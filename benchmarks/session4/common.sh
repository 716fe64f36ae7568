# Sourced by session 4's device calls 2, 3 and 5: the GPU tests (log in $OUT/tests.log, timeout
# $1 seconds), the E. coli pair as /tmp/mg.fa and /tmp/dh1.fa, and
#   run LABEL DIR OUT-DIR  one `hspZ run` of E. coli with the hspz package in DIR: wall, digest,
#                          --time's phases and the unit's ledger row, lines prefixed with LABEL
#   pyc COMMAND...         COMMAND with a bytecode cache (PYTHONPYCACHEPREFIX)
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
