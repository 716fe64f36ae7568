#!/usr/bin/env bash
# The closing device session (see BENCHMARKS.md): GPU tests, end-to-end `hspZ run` GPU vs CPU vs
# lastz (carried binary, single-threaded) on the bacterial pairs, the simulated 100 Mbp x 10 Mbp
# benchmark, and on a 2-GPU machine --gpus 1 vs 2 with the unit ledger.  Logs under $OUT.
set -uo pipefail
export PYTHONPATH=$PWD HSPZ_EXAMPLES=$PWD/.device/data PYTHONUNBUFFERED=1
D=.device/data
LASTZ=.device/bin/lastz
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv; nproc
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py > $OUT/tests.log 2>&1
tail -3 $OUT/tests.log
python3 - <<'PY' > $OUT/identity.log 2>&1  # worker machinery on the GPU: same digest as the CPU
import os, subprocess, sys
sys.path.insert(0, "tests")
from pathlib import Path
import multibin
d = Path("/tmp/mb"); d.mkdir(exist_ok=True)
ref, qry = multibin.write_pair(d)
for extra, env in [(["--backend", "cpu"], {}), (["--backend", "gpu"], {}),
                   (["--backend", "gpu", "--gpus", "2"], {}),
                   (["--backend", "gpu", "--gpus", "2"], {"HSPZ_UNIT_PARTITION": "0"}),
                   (["--backend", "gpu", "--gpus", "3"], {})]:
    p = subprocess.run([sys.executable, "-m", "hspz", "run", "-r", ref, "-q", qry, *multibin.FLAGS,
                        "-o", str(d / ("o" + "_".join(extra) + str(len(env)))), *extra],
                       capture_output=True, text=True, env={**os.environ, **env})
    digest = [x for x in p.stdout.splitlines() if x.startswith("digest")]
    policy = [x for x in p.stderr.splitlines() if x.startswith("schedule: policy")]
    print(extra, env, p.returncode, digest, policy, p.stderr.splitlines()[-1] if p.returncode else "")
PY
cat $OUT/identity.log
e2e() {  # label command...
  local label=$1; shift
  for i in 1 2 3; do
    /usr/bin/time -f "$label run$i wall %e s rss %M KB" "$@" > /tmp/e2e.out 2> /tmp/e2e.err
    tail -1 /tmp/e2e.err
    grep -h digest /tmp/e2e.out /tmp/e2e.err | head -1
  done
}
{
for pair in "G27 ELS37" "MG1655-K12 DH1"; do
  set -- $pair
  zcat $D/$1.fasta.gz | sed 's/^>\([^ ]*\).*/>\1/' > /tmp/$1.fa; zcat $D/$2.fasta.gz | sed 's/^>\([^ ]*\).*/>\1/' > /tmp/$2.fa
  e2e "$1 hspZ-gpu" python3 -m hspz run -r /tmp/$1.fa -q /tmp/$2.fa -o /tmp/g --backend gpu
  e2e "$1 hspZ-cpu-all" python3 -m hspz run -r /tmp/$1.fa -q /tmp/$2.fa -o /tmp/c --backend cpu
  e2e "$1 lastz" $LASTZ /tmp/$1.fa /tmp/$2.fa --nogapped --format=general-:name1,start1,end1,name2,start2,end2,strand2,score
done
} 2>&1 | tee $OUT/e2e.log
for s in "" "HSPZ_REF_BUCKETS=1"; do
  env $s timeout 200 python3 -m hspz benchmark -r $D/simM_ref.2bit -q $D/simM_query.2bit --backend gpu \
    --warmup 1 --iterations 3 --json $OUT/bench.jsonl 2>&1 | tail -1 | sed "s/^/simM $s: /"
done | tee $OUT/bench.log
python3 benchmarks/gpu_phases.py $D/simM_ref.2bit $D/simM_query.2bit --chunk 3 | tee -a $OUT/bench.log
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  F="-r $D/simM_ref.2bit -q $D/simM_query.2bit -B 25M --query-block-size 5M --backend gpu"
  timeout 200 python3 -m hspz run $F -o /tmp/warm --gpus 2 > /dev/null 2>&1
  for g in 1 2 1 2; do
    /usr/bin/time -f "gpus=$g wall %e s" timeout 200 python3 -m hspz run $F -o /tmp/g$g --gpus $g -y \
      > /tmp/gpus$g.log 2>&1
    grep -E "^schedule:|^lifecycle|^digest|wall|finished at" /tmp/gpus$g.log
  done 2>&1 | tee $OUT/gpus.log
  cp /tmp/gpus1.log $OUT/ledger_gpus1.log; cp /tmp/gpus2.log $OUT/ledger_gpus2.log
  /usr/bin/time -f "hits-estimate wall %e s" python3 -m hspz hits-estimate -r $D/simM_ref.2bit \
    -q $D/simM_query.2bit -B 25M --query-block-size 5M > /tmp/estimate.tsv 2> /tmp/estimate.log
  tail -1 /tmp/estimate.log | tee -a $OUT/gpus.log
  python3 - <<'PY' | tee -a $OUT/gpus.log
est = [l.split("\t")[4].strip() for l in open("/tmp/estimate.tsv").read().splitlines() if l.strip()]
rows = [l.rstrip("\n").split("\t") for l in open("/tmp/gpus1.log") if l.startswith("unit ledger:\t")]
col = rows[0].index("hits")
hits = [r[col].strip() for r in rows[1:]]
print("hits-estimate rows", len(est), "ledger rows", len(hits), "equal:", est == hits)
PY
fi
