#!/usr/bin/env bash
# Run by Snakemake inside the new conda env of hspz.yaml (`--sdm conda`): pip-installs hspZ with
# the workflow's Python dependencies from HSPZ_INSTALL_SOURCE, which the workflow sets when it
# is parsed (workflow/rules/common.smk, install_source): "hspz[workflow] @ file:///checkout" or
# "hspz[workflow] @ git+https://github.com/OWNER/hspZ@TAG" for a module, or the user's own.
set -euo pipefail
if [ -z "${HSPZ_INSTALL_SOURCE:-}" ]; then
    echo "hspz.post-deploy.sh: HSPZ_INSTALL_SOURCE is not set (the workflow sets it)" >&2
    exit 2
fi
python -m pip install --no-input "$HSPZ_INSTALL_SOURCE"
