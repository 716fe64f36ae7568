#!/usr/bin/env bash
# Session 23: makes .device/{pair,probe,var} and .device/call{1,2}.sh for this folder's calls,
# from the repository root (.device/alt and .device/bin from benchmarks/device_files.sh):
#   bash benchmarks/records/issue24_s23/prepare.sh REF.2bit QUERY.2bit
# REF and QUERY: the mammal30x6 pair that `benchmarks/run.py mammal30x6 ...` makes in its workdir
# (ref-ebe1db514fe65216.2bit, query-e76c334c11bb5a81.2bit; digest 5f54398c77a6c3a9).
#   var/prior  a1faed9            (the parallel table's k-mers on numpy's huge pages; call1.sh
#              measured it beside HEAD until it was trimmed, see there)
#   var/sync   HEAD + ../issue24_s22/sync.diff   (numba loaded on the main thread before the reads)
#   var/sync2  HEAD + ../issue24_s22/sync2.diff  (that, and its code generator started there too)
#   var/early  HEAD + early.diff  (numba loaded on a thread before the CLI's imports)
# call1.sh runs sync, sync2 and early through variant.py in the repository's own tree (one
# numba cache); call2.sh measures the ratio of the fastest one's tree (var/...) beside HEAD.
set -euo pipefail
HERE=benchmarks/records/issue24_s23
S22=benchmarks/records/issue24_s22
mkdir -p .device/pair .device/probe .device/var
cp "$1" .device/pair/ref30.2bit
cp "$2" .device/pair/qry6.2bit
cp "$S22/startup_timeline.py.txt" .device/probe/startup_timeline.py
for f in variant table_touch; do cp "$HERE/$f.py.txt" ".device/probe/$f.py"; done
cp "$HERE/call1.sh" "$HERE/call2.sh" "$HERE/call_ratio.sh" .device/
for v in prior sync sync2 early; do
  rm -rf ".device/var/$v"; mkdir -p ".device/var/$v"
  git archive "$( [ $v = prior ] && echo a1faed9 || echo HEAD )" hspz | tar -x -C ".device/var/$v"
  case $v in
    sync|sync2) patch -s -d ".device/var/$v" -p1 < "$S22/$v.diff" ;;
    early) patch -s -d ".device/var/$v" -p1 < "$HERE/early.diff" ;;
  esac
  echo "alt: $(git rev-parse --short HEAD)+$v" > ".device/var/$v/COMMIT"
done
echo "alt: a1faed9" > .device/var/prior/COMMIT
