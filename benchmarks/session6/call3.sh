#!/usr/bin/env bash
# Session 6's device call 3, on nvidia-h200: where the device's finish goes on simM and E. coli
# (benchmarks/finish_phases.py), for three chain caps.
#   run(kind="nvidia-h200", carry=[".device"], command="bash benchmarks/session6/call3.sh")
set -uo pipefail
export PYTHONPATH=$PWD
D=$PWD/.device/data
zcat $D/MG1655-K12.fasta.gz > /tmp/mg.fa; zcat $D/DH1.fasta.gz > /tmp/dh1.fa
for cap in 4096 65536 1073741824; do
  python3 benchmarks/finish_phases.py $D/simM_ref.2bit $D/simM_query.2bit --chain-cap $cap
done 2>&1 | tee $OUT/simm_phases.log
python3 benchmarks/finish_phases.py /tmp/mg.fa /tmp/dh1.fa 2>&1 | tee $OUT/ecoli_phases.log
