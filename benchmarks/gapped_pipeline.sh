#!/bin/bash
# The gapped pipeline against plain gapped LASTZ on one pair (BENCHMARKS.md, "The gapped
# stage"): `lastz REF QUERY --format=maf`, then hspZ run -t CORES followed by the gapped
# groups, CORES at a time, exactly as the workflow's rules run them (hspZ gapped --stage
# reference / split / extend, then the parts concatenated), per interval size given.
#   benchmarks/gapped_pipeline.sh REF QUERY WORKDIR CORES "I:GROUP_BYTES ..."
# e.g. benchmarks/gapped_pipeline.sh N315.fa COL.fa /tmp/gp 2 "10M:1000000 1M:300000"
# REF and QUERY are FASTA or FASTA.gz (a .gz is gunzipped into WORKDIR: lastz reads no gzip).
# Each step prints wall and user CPU seconds; the load is printed before every arm (the dev
# machine is shared). Runs where hspZ is no command (`python3 -m hspz` from PYTHONPATH then)
# and without GNU time or bc, as on the GPU machine; there, from the repository root, after
# `bash benchmarks/device_files.sh` here (lastz and the S. aureus pair in .device/):
#   PATH=$PWD/.device/bin:$PATH PYTHONPATH=$PWD benchmarks/gapped_pipeline.sh \
#     .device/data/N315.fasta.gz .device/data/COL.fasta.gz /tmp/gp 16 "250K:150000"
set -euo pipefail
work=$3; cores=$4; arms=$5
mkdir -p "$work"
plain() {  # a FASTA lastz can read: the file itself, or its gunzipped copy in WORKDIR
    case $1 in
        *.gz) local out; out=$(realpath "$work")/$(basename "${1%.gz}")
              gunzip -c "$1" > "$out"; echo "$out" ;;
        *) realpath "$1" ;;
    esac
}
ref=$(plain "$1"); qry=$(plain "$2")
cd "$work"
if ! command -v hspZ > /dev/null; then  # this tree's package, as `hspZ`
    mkdir -p bin && printf '#!/bin/sh\nexec python3 -m hspz "$@"\n' > bin/hspZ && chmod +x bin/hspZ
    export PATH=$PWD/bin:$PATH
fi
# `timed LABEL CMD...`: CMD's wall and user seconds (and peak KB with GNU time) on stderr
if [ -x /usr/bin/time ]; then
    timed() { local label=$1; shift; /usr/bin/time -f "$label: %e s wall, %U s user, %M KB" "$@"; }
else
    timed() { local label=$1; shift; local TIMEFORMAT="$label: %R s wall, %U s user"; time "$@"; }
fi
export -f timed
now() { python3 -c 'import time; print(time.time())'; }
echo "load: $(uptime)"
timed "plain lastz --format=maf" lastz "$ref" "$qry" --format=maf > plain.maf 2> plain.err
tail -1 plain.err
echo "plain lastz: $(grep -c '^a ' plain.maf) alignments"
for arm in $arms; do
    I=${arm%%:*}; bytes=${arm##*:}; rm -rf "out$I"
    echo "== -I $I, groups of at most $bytes segments bytes; load: $(uptime)"
    start=$(now)
    timed "hspZ run -t $cores" hspZ run -r "$ref" -q "$qry" -o "out$I" \
        --backend cpu -t "$cores" -I "$I" 2>&1 >/dev/null | tail -1
    hspZ plan -r "$ref" -q "$qry" -o "plan$I.txt" --backend cpu -I "$I" > /dev/null 2>&1
    hspZ gapped --stage split --plan "plan$I.txt" --group-bytes "$bytes" \
        --output "groups$I.txt" "out$I"
    hspZ gapped --stage reference --plan "plan$I.txt" --output "ref$I.2bit" 2> /dev/null
    groups=$(wc -l < "groups$I.txt")
    seq 0 $((groups - 1)) | xargs -P "$cores" -I{} bash -c "timed 'group {}' hspZ gapped \
        --stage extend --plan plan$I.txt --groups groups$I.txt --group {} \
        --reference-2bit ref$I.2bit --output part$I.{}.maf out$I 2>&1 | grep '^group'"
    for k in $(seq 0 $((groups - 1))); do cat "part$I.$k.maf"; done > "gathered$I.maf"
    end=$(now)
    echo "-I $I: the whole pipeline $(python3 -c "print(f'{$end - $start:.2f}')") s wall," \
         "$groups groups, $(grep -c '^a ' "gathered$I.maf") alignments"
done
echo "load: $(uptime)"
