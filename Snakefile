# hspZ as a Snakemake workflow: per (job, query) one plan, W work jobs, one merge.
# How to configure and run it: config/README.md.
from snakemake.utils import min_version

min_version("8.0")


configfile: "config/config.yaml"


include: "workflow/Snakefile"


rule all:
    input:
        final_outputs(),
    default_target: True
