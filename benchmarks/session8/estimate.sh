#!/usr/bin/env bash
# Session 8's device call 4, on the warm nvidia-h200-x2 after `gpus_scaling.sh` ran the pair
# REF_MBP x QUERY_MBP (default 1000 x 500): `hspZ hits-estimate` with -B 250M, its rows in
# $OUT/est.tsv, and the --gpus 1 run's unit ledger in $OUT/ledger1.txt to compare them with:
#   run(kind="nvidia-h200-x2", carry=[".device"], command="bash benchmarks/session8/estimate.sh")
# (session 8 ran the same commands inline, when the pair still lay at /tmp/big_ref.2bit).
set -uo pipefail
export PYTHONPATH=$PWD PYTHONPYCACHEPREFIX=/tmp/pyc
unset PYTHONDONTWRITEBYTECODE
PAIR=/tmp/big_${REF_MBP:-1000}x${QUERY_MBP:-500}
/usr/bin/time -f "hits-estimate wall %e s user %U s" python3 -m hspz hits-estimate \
  -r ${PAIR}_ref.2bit -q ${PAIR}_qry.2bit -B 250M > $OUT/est.tsv 2> $OUT/est.err
cat $OUT/est.tsv $OUT/est.err
grep -E "^unit ledger:" /tmp/gpus1.log > $OUT/ledger1.txt
# the ledger's (ref_bin, query_bin, hits) against the estimate's rows
diff <(awk -F'\t' '$2 ~ /^[0-9]+$/{print $5"\t"$6"\t"$13}' $OUT/ledger1.txt | sort) \
     <(awk -F'\t' '{print $1"\t"$2"\t"$5}' $OUT/est.tsv | sort) && echo "estimate = ledger, every row"
