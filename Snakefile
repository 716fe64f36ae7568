# hspZ as a Snakemake workflow: a query sheet -> index -> plan -> work[W] -> merge, per batch.
# How to configure and run it: config/README.md.
configfile: "config/config.yaml"


include: "workflow/Snakefile"


rule all:
    default_target: True
    input:
        final_outputs(),
