# Every worker's results replayed in ordinal order into results/<batch>/: the bytes
# `hspZ run --query-list` writes (000001/, ... or archives, queries.tsv last), plus names.tsv.
# The flags follow the results: -Z takes an optional path and would swallow the first result.
rule hspz_merge:
    input:
        plan=f"{WORK}/{{batch}}/plan.txt",
        names=f"{WORK}/{{batch}}/names.tsv",
        results=work_results,
    output:
        queries=f"{RESULTS}/{{batch}}/queries.tsv",
        names=f"{RESULTS}/{{batch}}/names.tsv",
        ledger=f"{WORK}/{{batch}}/ledger.tsv",
    log:
        f"{LOGS}/hspz_merge/{{batch}}.log",
    conda:
        "../envs/hspz.yaml"
    threads: 1
    params:
        out=f"{RESULTS}/{{batch}}",
        flags=merge_flags,
    shell:
        "(hspZ merge --plan {input.plan} --output {params.out} --ledger {output.ledger}"
        " {input.results} {params.flags} && cp {input.names} {output.names}) > {log} 2>&1"
