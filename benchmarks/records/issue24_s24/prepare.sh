#!/usr/bin/env bash
# Session 24: makes .device/{pair,probe} and .device/call3.sh, from the repository root, with
# .device/alt = 98fd03c and .device/bin from `ALT=98fd03c bash benchmarks/device_files.sh`:
#   bash benchmarks/records/issue24_s24/prepare.sh REF.2bit QUERY.2bit
# REF and QUERY: the mammal30x6 pair that `benchmarks/run.py mammal30x6 ...` makes in its workdir
# (ref-ebe1db514fe65216.2bit, query-e76c334c11bb5a81.2bit; digest 5f54398c77a6c3a9).
set -euo pipefail
mkdir -p .device/pair .device/probe
cp "$1" .device/pair/ref30.2bit
cp "$2" .device/pair/qry6.2bit
cp benchmarks/records/issue24_s22/startup_timeline.py.txt .device/probe/startup_timeline.py
cp benchmarks/records/issue24_s24/call3.sh .device/
rm -rf .device/var
