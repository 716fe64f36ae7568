# The optional gapped stage (gapped: true), side by side. Each segments file of a query is
# handed to LASTZ as KegAlign hands them, `lastz REF[multiple][subset=bin] QUERY[subset=bin]
# --strand=plus|minus --segments=FILE`. After the merge a query's files are cut into
# consecutive groups of at most `gapped_group_bytes` segments bytes (hspz_gapped_split, a
# checkpoint); one hspz_gapped job per group runs its lastz processes; hspz_gapped_gather
# concatenates the groups in order into results/gapped/<batch>/NNNNNN.<format>: the bytes of
# `hspZ gapped` over all the files, one after the other. The reference is written as 2bit
# once per batch.
localrules:
    hspz_gapped_split,
    hspz_gapped_gather,


rule hspz_gapped_reference:
    input:
        plan=f"{WORK}/{{batch}}/plan.txt",
    output:
        temp(f"{WORK}/{{batch}}/gapped/reference.2bit"),
    log:
        f"{LOGS}/hspz_gapped_reference/{{batch}}.log",
    conda:
        "../envs/hspz.yaml"
    threads: 1
    shell:
        "hspZ gapped --stage reference --plan {input.plan:q} --output {output:q} > {log:q} 2>&1"


checkpoint hspz_gapped_split:
    input:
        plan=f"{WORK}/{{batch}}/plan.txt",
        queries=f"{RESULTS}/{{batch}}/queries.tsv",
    output:
        f"{WORK}/{{batch}}/gapped/{{n}}/groups.txt",
    log:
        f"{LOGS}/hspz_gapped_split/{{batch}}/{{n}}.log",
    conda:
        "../envs/hspz.yaml"
    threads: 1
    params:
        segments=f"{RESULTS}/{{batch}}/{{n}}",
        bound=setting("gapped_group_bytes"),
    shell:
        "hspZ gapped --stage split --plan {input.plan:q} --job {wildcards.n:q}"
        " --group-bytes {params.bound:q} --output {output:q} {params.segments:q} > {log:q} 2>&1"


rule hspz_gapped:
    input:
        plan=f"{WORK}/{{batch}}/plan.txt",
        groups=f"{WORK}/{{batch}}/gapped/{{n}}/groups.txt",
        reference=f"{WORK}/{{batch}}/gapped/reference.2bit",
    output:
        temp(f"{WORK}/{{batch}}/gapped/{{n}}/part{{g}}.{{format}}"),
    log:
        f"{LOGS}/hspz_gapped/{{batch}}/{{n}}.part{{g}}.{{format}}.log",
    wildcard_constraints:
        g=r"[0-9]+",
        format=r"[a-z][a-z-]*",
    conda:
        "../envs/hspz.yaml"
    threads: 1
    resources:
        # lastz holds the reference at a byte a base (the 2bit holds four a byte)
        mem_mb=lambda wildcards, input: 500 + 8 * int(input.size_mb),
    params:
        segments=f"{RESULTS}/{{batch}}/{{n}}",
        lastz=setting("lastz"),
        flags=setting("lastz_flags"),
    shell:
        "hspZ gapped --stage extend --plan {input.plan:q} --job {wildcards.n:q}"
        " --groups {input.groups:q} --group {wildcards.g:q} --reference-2bit {input.reference:q}"
        " --format {wildcards.format:q} --lastz {params.lastz:q} --lastz-flags={params.flags:q}"
        " --output {output:q} {params.segments:q} > {log:q} 2>&1"


rule hspz_gapped_gather:
    input:
        gapped_parts,
    output:
        report(
            f"{RESULTS}/gapped/{{batch}}/{{n}}.{{format}}",
            caption="../report/gapped.rst",
            category="Gapped alignments",
            labels=gapped_labels,
        ),
    log:
        f"{LOGS}/hspz_gapped_gather/{{batch}}/{{n}}.{{format}}.log",
    wildcard_constraints:
        format=r"[a-z][a-z-]*",
    conda:
        "../envs/hspz.yaml"
    shell:
        "(cat {input:q} > {output:q}.partial && mv {output:q}.partial {output:q}) 2> {log:q}"
