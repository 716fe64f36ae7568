#!/usr/bin/env bash
# Session 5's device call 3 (BENCHMARKS.md, "Session 5"), on nvidia-h200-x2, from the repository root:
#   run(kind="nvidia-h200-x2", carry=[".device"], command="bash benchmarks/session5/call3.sh")
# --gpus 1 and --gpus 2 on a simulated 1000 x 500 Mbp pair, -B 250M (4 reference bins x 2 query
# bins, 8 units), this code and session 4's (.device/s4 = `git archive 3e33fab hspz`), with a
# bytecode cache; then which call first imports cupyx (cupyx_probe.py).
export PYTHONPATH=$PWD
PYC=1 REF_MBP=1000 QUERY_MBP=500 BIN=250M ALT=$PWD/.device/s4 TAG=big_ bash benchmarks/gpus_scaling.sh
zcat .device/data/MG1655-K12.fasta.gz > /tmp/mg.fa; zcat .device/data/DH1.fasta.gz > /tmp/dh1.fa
python3 benchmarks/session5/cupyx_probe.py /tmp/mg.fa /tmp/dh1.fa 2>&1 | tail -40 > $OUT/probe.log
