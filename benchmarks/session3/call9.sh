#!/usr/bin/env bash
# Session 3's device call 9 (BENCHMARKS.md, "Session 3"), run from the repository root:
#   run(carry=[".device"], command="bash benchmarks/session3/call9.sh")
# .device/ (not versioned) holds the inputs (data/), lastz (bin/) and the versions compared,
# each made by `git archive COMMIT hspz | tar -x -C .device/NAME`: prev=3334caa, mid=8db1591,
# alt=1e5dc7e, g23 and g24 = 724e8cb with GROUP_BASES 1 << 23 or 1 << 24, early = 1e5dc7e
# with .device/early_pool.patch.
D=$PWD/.device/data; zcat $D/MG1655-K12.fasta.gz | sed 's/^>\([^ ]*\).*/>\1/' > /tmp/mg.fa; zcat $D/DH1.fasta.gz | sed 's/^>\([^ ]*\).*/>\1/' > /tmp/dh1.fa
python3 -m compileall -q hspz >/dev/null; export PYTHONPATH=$PWD
python3 -m hspz run -r /tmp/mg.fa -q /tmp/dh1.fa -o /tmp/w --backend gpu >/dev/null 2>&1
for i in 1 2 3; do
  /usr/bin/time -f "ecoli hspZ-gpu run$i wall %e s" python3 -m hspz run -r /tmp/mg.fa -q /tmp/dh1.fa -o /tmp/g$i --backend gpu 2>&1 | grep -E "wall|digest" | tr '\n' ' '; echo
  /usr/bin/time -f "ecoli lastz run$i wall %e s" .device/bin/lastz /tmp/mg.fa /tmp/dh1.fa --nogapped --format=general-:name1,start1,end1,name2,start2,end2,strand2,score > /tmp/lz.out 2>/tmp/lz.err; tail -1 /tmp/lz.err
done 2>&1 | tee $OUT/ecoli_x2.log
