#!/bin/bash
# The gapped pipeline against plain gapped LASTZ on one pair (BENCHMARKS.md, "The gapped
# stage"): `lastz REF QUERY --format=maf`, then hspZ run -t CORES followed by the gapped
# groups, CORES at a time, exactly as the workflow's rules run them (hspZ gapped --stage
# reference / split / extend, then the parts concatenated), per interval size given.
#   benchmarks/gapped_pipeline.sh REF.fa QUERY.fa WORKDIR CORES "I:GROUP_BYTES ..."
# e.g. benchmarks/gapped_pipeline.sh N315.fa COL.fa /tmp/gp 2 "10M:1000000 1M:300000"
# REF and QUERY are plain FASTA (lastz reads no gzip). Each step prints wall and user CPU
# seconds (GNU time); the load is printed before every arm: the dev machine is shared.
set -euo pipefail
ref=$(realpath "$1"); qry=$(realpath "$2"); work=$3; cores=$4; arms=$5
mkdir -p "$work" && cd "$work"
T='%e s wall, %U s user, %M KB'
now() { date +%s.%N; }
echo "load: $(uptime)"
/usr/bin/time -f "plain lastz --format=maf: $T" lastz "$ref" "$qry" --format=maf \
    > plain.maf 2> plain.err
tail -1 plain.err
echo "plain lastz: $(grep -c '^a ' plain.maf) alignments"
for arm in $arms; do
    I=${arm%%:*}; bytes=${arm##*:}; rm -rf "out$I"
    echo "== -I $I, groups of at most $bytes segments bytes; load: $(uptime)"
    start=$(now)
    /usr/bin/time -f "hspZ run -t $cores: $T" hspZ run -r "$ref" -q "$qry" -o "out$I" \
        --backend cpu -t "$cores" -I "$I" 2>&1 >/dev/null | tail -1
    hspZ plan -r "$ref" -q "$qry" -o "plan$I.txt" --backend cpu -I "$I" > /dev/null 2>&1
    hspZ gapped --stage split --plan "plan$I.txt" --group-bytes "$bytes" \
        --output "groups$I.txt" "out$I"
    hspZ gapped --stage reference --plan "plan$I.txt" --output "ref$I.2bit" 2> /dev/null
    groups=$(wc -l < "groups$I.txt")
    seq 0 $((groups - 1)) | xargs -P "$cores" -I{} /usr/bin/time -f "group {}: $T" \
        hspZ gapped --stage extend --plan "plan$I.txt" --groups "groups$I.txt" --group {} \
        --reference-2bit "ref$I.2bit" --output "part$I.{}.maf" "out$I" 2>&1 | grep '^group'
    for k in $(seq 0 $((groups - 1))); do cat "part$I.$k.maf"; done > "gathered$I.maf"
    end=$(now)
    echo "-I $I: the whole pipeline $(echo "$end - $start" | bc) s wall, $groups groups," \
         "$(grep -c '^a ' "gathered$I.maf") alignments"
done
echo "load: $(uptime)"
