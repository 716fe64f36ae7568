# What `snakemake --report` shows: a summary table per batch (queries.tsv, names.tsv and the
# unit ledger) and a dot plot per query.
rule hspz_summary:
    input:
        queries=f"{RESULTS}/{{batch}}/queries.tsv",
        names=f"{RESULTS}/{{batch}}/names.tsv",
        ledger=f"{WORK}/{{batch}}/ledger.tsv",
    output:
        report(
            f"{RESULTS}/reports/{{batch}}/summary.tsv",
            caption="../report/summary.rst",
            category="Summary",
            labels={"batch": "{batch}"},
        ),
    log:
        f"{LOGS}/hspz_summary/{{batch}}.log",
    conda:
        "../envs/hspz.yaml"
    shell:
        "hspZ summarize --queries {input.queries} --names {input.names}"
        " --ledger {input.ledger} --output {output} > {log} 2>&1"


rule hspz_dotplot:
    input:
        plan=f"{WORK}/{{batch}}/plan.txt",
        queries=f"{RESULTS}/{{batch}}/queries.tsv",
    output:
        report(
            f"{RESULTS}/reports/{{batch}}/{{n}}.dotplot.png",
            caption="../report/dotplot.rst",
            category="Dot plots",
            labels={"batch": "{batch}", "query": "{n}"},
        ),
    log:
        f"{LOGS}/hspz_dotplot/{{batch}}/{{n}}.log",
    conda:
        "../envs/hspz.yaml"
    params:
        segments=f"{RESULTS}/{{batch}}/{{n}}",
    shell:
        "hspZ dotplot --plan {input.plan} --job {wildcards.n} --output {output}"
        " {params.segments} > {log} 2>&1"
