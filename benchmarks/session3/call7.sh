#!/usr/bin/env bash
# Session 3's device call 7 (BENCHMARKS.md, "Session 3"), run from the repository root:
#   run(carry=[".device"], command="bash benchmarks/session3/call7.sh")
# .device/ (not versioned) holds the inputs (data/), lastz (bin/) and the versions compared,
# each made by `git archive COMMIT hspz | tar -x -C .device/NAME`: prev=3334caa, mid=8db1591,
# alt=1e5dc7e, g23 and g24 = 724e8cb with GROUP_BASES 1 << 23 or 1 << 24, early = 1e5dc7e
# with .device/early_pool.patch.
# two-GPU scaling, 500 x 300 Mbp; ALT = 1e5dc7e (before the merged digest, two-thread reading, CUDA warm-up thread)
QUERY_MBP=300 REPEAT=2 ALT=$PWD/.device/alt bash benchmarks/gpus_scaling.sh 2>&1 | grep -E "wall|digest" | tail -20
D=$PWD/.device/data
zcat $D/MG1655-K12.fasta.gz | sed 's/^>\([^ ]*\).*/>\1/' > /tmp/mg.fa
zcat $D/DH1.fasta.gz | sed 's/^>\([^ ]*\).*/>\1/' > /tmp/dh1.fa
for v in $PWD $PWD/.device/alt; do (cd $v; PYTHONPATH=$v python3 -m hspz run -r /tmp/mg.fa -q /tmp/dh1.fa -o /tmp/w --backend gpu > /dev/null 2>&1); done
for i in 1 2 3; do for v in $PWD $PWD/.device/alt; do
  (cd $v; PYTHONPATH=$v /usr/bin/time -f "ecoli $(basename $v) run$i wall %e s" python3 -m hspz run -r /tmp/mg.fa -q /tmp/dh1.fa -o /tmp/e$i --backend gpu --time 2>&1 | grep -E "^digest|time: (input|plan|wall)|ecoli" | tr '\n' ' '; echo)
done; done 2>&1 | tee $OUT/ecoli.log
