#!/usr/bin/env bash
# The workflow's overhead on the GPU (issue 25 item 6): the 20 x 5 Mbp batch against 1 Gbp
# (benchmarks/index_batch.py's pair, made on the device) through the Snakemake workflow (local
# profile, one GPU, workers 1, index true, report off) against `hspZ index` + `hspZ run --index
# --query-list`, 3 interleaved runs each from fresh folders, outputs checked equal; then the
# workflow's fixed cost alone: a rerun with nothing to do (parse + DAG) and the per-rule walls
# (benchmarks/workflow_overhead.py). Not run by its author (the coordinator owns the device).
#
# Snakemake is not in the device image: carry its wheels (pure Python but rpds-py and
# immutables; versions as in this checkout's .venv, snakemake 9.15.0), once, here:
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 -d .whl $(cat benchmarks/workflow_wheels.txt)
# then:
#   export OUT=$PWD/out && mkdir -p $OUT && bash benchmarks/workflow_overhead_gpu.sh  # 1 GPU, repository root
# Outputs under $OUT: gen.log, wf.log, workflow_overhead.jsonl, summary.txt, machine.txt (with
# STAMPS=1 also stamps-ARM-RUN.txt and the wrapper in stamper/).
# RUNS=N (default 3) sets the measured runs; STAMPS=1 times each hspZ process of both arms and
# Snakemake's seconds around them (workflow_overhead.py --stamps: a shell wrapper, a few ms a
# process, in both arms); PROFILE=1 adds one workflow run whose hspZ
# processes run under cProfile (benchmarks/profile_hspz.py): $OUT/profile/ holds each
# process's .prof, stamps.tsv (its seconds) and report.txt (top functions by cumulative time).
set -uo pipefail
[ -d "${OUT:-}" ] || { echo "workflow_overhead_gpu.sh: OUT must name a folder" >&2; exit 2; }
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=/tmp/pyc
unset PYTHONDONTWRITEBYTECODE
{ nvidia-smi -L; nproc; uptime; git rev-parse --short HEAD 2>/dev/null; } > "$OUT/machine.txt" 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl > "$OUT/pip.log" 2>&1 || { tail "$OUT/pip.log"; exit 1; }
export PYTHONPATH=$PWD:/tmp/site
# hspZ on PATH for the workflow's shell jobs: this tree's package
mkdir -p /tmp/bin && printf '#!/bin/sh\nexec python3 -m hspz "$@"\n' > /tmp/bin/hspZ \
  && chmod +x /tmp/bin/hspZ && export PATH=/tmp/bin:$PATH
python3 -m snakemake --version || exit 1
# the pair (reference 1 Gbp as 2bit, 20 x 5 Mbp queries, list.txt); the index the script builds
# is not used: each arm builds its own
[ -f /tmp/ib/list.txt ] || timeout 200 python3 benchmarks/index_batch.py --work /tmp/ib \
  --out "$OUT" --steps gen > "$OUT/gen.log" 2>&1 || { tail "$OUT/gen.log"; exit 1; }
# one warm-up of each arm (CuPy's kernel cache, the page cache), not counted
timeout 120 python3 benchmarks/workflow_overhead.py --work /tmp/ib --out /tmp/warm --runs 1 \
  --backend gpu > "$OUT/warm.log" 2>&1
timeout 420 python3 benchmarks/workflow_overhead.py --work /tmp/ib --out "$OUT" --runs "${RUNS:-3}" \
  --backend gpu --rerun $([ "${STAMPS:-0}" = 1 ] && echo --stamps) > "$OUT/wf.log" 2>&1
tail -12 "$OUT/wf.log"
if [ "${PROFILE:-0}" = 1 ]; then
  mkdir -p /tmp/pbin "$OUT/profile" /tmp/prof-out
  printf '#!/bin/sh\nexec python3 %s/benchmarks/profile_hspz.py "$@"\n' "$PWD" > /tmp/pbin/hspZ
  chmod +x /tmp/pbin/hspZ
  PATH=/tmp/pbin:$PATH HSPZ_PROFILE_DIR=$OUT/profile timeout 200 python3 \
    benchmarks/workflow_overhead.py --work /tmp/ib --out /tmp/prof-out --runs 1 --backend gpu \
    --rerun > "$OUT/profile/wf.log" 2>&1
  python3 benchmarks/profile_hspz.py --report "$OUT/profile" > "$OUT/profile/report.txt" 2>&1
  cat "$OUT/profile/stamps.tsv"
fi
