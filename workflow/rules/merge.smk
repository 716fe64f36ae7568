# The flags follow the results: -Z takes an optional path and would swallow the first result.
rule hspz_merge:
    input:
        plan="results/{job}/plan.txt",
        results=work_results,
    output:
        segments=directory("results/{job}/segments"),
        digest="results/{job}/digest.txt",
    log:
        "logs/hspz_merge/{job}.log",
    params:
        flags=merge_flags,
    threads: 1
    conda:
        "../envs/hspz.yaml"
    shell:
        "hspZ merge --plan {input.plan} --output {output.segments} {input.results}"
        " {params.flags} > {log} 2>&1"
        " && grep '^digest: ' {log} > {output.digest}"
