# Sourced by the device scripts (gpu_nshit.sh, gpu_e2e.sh, gpus_scaling.sh), from the repository
# root on the device: hspZ from this tree, lastz and the data from the carried .device/ (made by
# benchmarks/device_files.sh), outputs under $OUT, generated pairs in $W (default /tmp/bench,
# where the next call on the same warm machine finds them again).
# PYC=1 (default) gives every process a bytecode cache, as any pip-installed numpy has: the device
# sets PYTHONDONTWRITEBYTECODE and its numpy ships no .pyc, so each process would compile numpy
# from source (0.3-0.6 s a run, BENCHMARKS.md "How to read a figure").  PYC=0: Python as given.
# MACHINE names the machine in the records (default: GPU name and count, cores).
# TESTS=1 runs tests/test_gpu.py first (log in $OUT/tests.log).
# ALT=DIR (e.g. .device/alt from `ALT=COMMIT bash benchmarks/device_files.sh`) runs every hspZ
# arm a second time with the package in DIR, side by side.
[ -d "${OUT:-}" ] || { echo "device_env.sh: OUT must name a folder" >&2; exit 2; }
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PATH=$PWD/.device/bin:$PATH
export HSPZ_EXAMPLES=$PWD/.device/data
if [ "${PYC:-1}" = 1 ]; then unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc; fi
W=${W:-/tmp/bench}
mkdir -p "$W"
if [ -z "${MACHINE:-}" ]; then
  MACHINE="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
  MACHINE="${MACHINE:-no GPU} x$(nvidia-smi -L 2>/dev/null | grep -c GPU), $(nproc) cores"
fi
ALT_ARGS=()
[ -n "${ALT:-}" ] && ALT_ARGS=(--alt "$ALT")
{ echo "machine: $MACHINE"; nvidia-smi -L 2>&1; nproc; uptime; python3 --version
  [ -f "${ALT:-/nonexistent}/COMMIT" ] && cat "$ALT/COMMIT"
  echo "transparent huge pages: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>&1)"
  lscpu 2>&1 | grep -E "^(Model name|Thread|Core|Socket|L2|L3|CPU MHz|NUMA node)"; } > "$OUT/machine.txt"
if [ "${TESTS:-0}" = 1 ]; then
  timeout "${TESTS_TIMEOUT:-240}" python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py \
    > "$OUT/tests.log" 2>&1
  echo "GPU tests: $(tail -1 "$OUT/tests.log")"
fi
