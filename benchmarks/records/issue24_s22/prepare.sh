#!/usr/bin/env bash
# Session 22 (no device could be had): makes .device/{pair,probe,var} for call1.sh, for a later
# session, from the repository root:
#   bash benchmarks/records/issue24_s22/prepare.sh REF.2bit QUERY.2bit
# REF and QUERY: the mammal30x6 pair that `benchmarks/run.py mammal30x6 ...` makes in its workdir
# (30 and 6 Mbp, digest 5f54398c77a6c3a9).
#   var/base   HEAD
#   var/sync   HEAD + sync.diff   (numba imported on the main thread before the inputs are read)
#   var/sync2  HEAD + sync2.diff  (that, and its code generator started there too)
#   var/prior  a1faed9            (the parallel table's k-mers on numpy's huge pages)
set -euo pipefail
HERE=benchmarks/records/issue24_s22
mkdir -p .device/pair .device/probe .device/var
cp "$1" .device/pair/ref30.2bit
cp "$2" .device/pair/qry6.2bit
for f in startup_timeline startup_parts table_thp; do cp "$HERE/$f.py.txt" ".device/probe/$f.py"; done
cp "$HERE/call1.sh" .device/call1.sh
for v in base sync sync2 prior; do
  rm -rf ".device/var/$v"; mkdir -p ".device/var/$v"
  git archive "$( [ $v = prior ] && echo a1faed9 || echo HEAD )" hspz | tar -x -C ".device/var/$v"
  case $v in sync|sync2) patch -s -d ".device/var/$v" -p1 < "$HERE/$v.diff" ;; esac
done
