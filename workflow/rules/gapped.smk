# The optional gapped stage (gapped: true): each segments file of a query handed to LASTZ as
# KegAlign hands them, `lastz REF[multiple][subset=bin] QUERY[subset=bin] --strand=plus|minus
# --segments=FILE`, one file at a time, their alignments concatenated in emission order.
rule hspz_gapped:
    input:
        plan=f"{WORK}/{{batch}}/plan.txt",
        queries=f"{RESULTS}/{{batch}}/queries.tsv",
    output:
        f"{RESULTS}/gapped/{{batch}}/{{n}}.{{format}}",
    log:
        f"{LOGS}/hspz_gapped/{{batch}}/{{n}}.{{format}}.log",
    conda:
        "../envs/hspz.yaml"
    threads: 1
    params:
        segments=f"{RESULTS}/{{batch}}/{{n}}",
        lastz=lambda wildcards: batch_job(wildcards)["lastz"],
        flags=lambda wildcards: batch_job(wildcards)["lastz_flags"],
    shell:
        "hspZ gapped --plan {input.plan} --job {wildcards.n} --format {wildcards.format}"
        " --lastz {params.lastz} --lastz-flags={params.flags:q} --output {output}"
        " {params.segments} > {log} 2>&1"
