#!/usr/bin/env bash
# Run HERE (the dev machine), from the repository root, before a device call: fills .device/
# (git-ignored; copy it beside the checkout on the GPU machine) with what that machine lacks:
#   .device/bin/lastz   the Debian lastz 1.04.22 binary (needs only libc and libm)
#   .device/data/       the H. pylori, E. coli and S. aureus pairs (Debian ragout-examples) under
#                       their own file names (run.py --files .device/data finds them there;
#                       N315 and COL for gapped_pipeline.sh), and lastz's test data
#                       (tests/test_gpu.py reads it through HSPZ_EXAMPLES)
#   .device/alt/hspz    with ALT=COMMIT: that commit's hspz package (`git archive`), the
#                       baseline an A/B runs beside this code (the scripts' ALT=.device/alt)
# About 10 MB; the working tree that travels is limited to 64 MiB.
#   bash benchmarks/device_files.sh            ALT=9786b32 bash benchmarks/device_files.sh
set -euo pipefail
RAGOUT=/usr/share/doc/ragout/examples
mkdir -p .device/bin .device/data
cp "$(command -v lastz)" .device/bin/lastz
cp $RAGOUT/H.Pylori/references/{G27,ELS37}.fasta.gz $RAGOUT/E.Coli/references/{MG1655-K12,DH1}.fasta.gz \
  $RAGOUT/S.Aureus/references/{N315,COL}.fasta.gz \
  .device/data/
cp /usr/share/doc/lastz/examples/test_data/* .device/data/
if [ -n "${ALT:-}" ]; then
  rm -rf .device/alt && mkdir -p .device/alt
  git archive "$ALT" hspz | tar -x -C .device/alt
  echo "alt: $(git rev-parse --short "$ALT")" > .device/alt/COMMIT
fi
du -sh .device
