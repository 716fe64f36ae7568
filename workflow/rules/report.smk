# What `snakemake --report` shows: per batch the summary as an HTML table (and its TSV), per
# query a dot plot and the HSPs' score and length distributions; the landing page is
# report/workflow.rst (facts from report_inputs.smk).
localrules:
    hspz_summary,


rule hspz_summary:
    input:
        queries=f"{RESULTS}/{{batch}}/queries.tsv",
        names=f"{RESULTS}/{{batch}}/names.tsv",
        ledger=f"{WORK}/{{batch}}/ledger.tsv",
        gapped=summary_gapped,
    output:
        tsv=f"{RESULTS}/reports/{{batch}}/summary.tsv",
        html=report(
            f"{RESULTS}/reports/{{batch}}/summary.html",
            caption="../report/summary.rst",
            category="Summary",
            labels={"batch": "{batch}"},
        ),
    log:
        f"{LOGS}/hspz_summary/{{batch}}.log",
    conda:
        "../envs/hspz.yaml"
    params:
        gapped=lambda wildcards, input: (
            ["--gapped", *input.gapped] if input.gapped else []
        ),
        title=lambda wildcards: f"hspZ: the queries of batch {wildcards.batch}",
    shell:
        "hspZ summarize --queries {input.queries:q} --names {input.names:q}"
        " --ledger {input.ledger:q} {params.gapped:q} --html {output.html:q}"
        " --title {params.title:q} --output {output.tsv:q} > {log:q} 2>&1"


rule hspz_dotplot:
    input:
        plan=f"{WORK}/{{batch}}/plan.txt",
        queries=f"{RESULTS}/{{batch}}/queries.tsv",
        names=f"{RESULTS}/{{batch}}/names.tsv",
    output:
        plot=report(
            f"{RESULTS}/reports/{{batch}}/{{n}}.dotplot.png",
            caption="../report/dotplot.rst",
            category="Dot plots",
            subcategory="{batch}",
            labels=query_labels,
        ),
        distribution=report(
            f"{RESULTS}/reports/{{batch}}/{{n}}.hsps.png",
            caption="../report/distribution.rst",
            category="HSP scores and lengths",
            subcategory="{batch}",
            labels=query_labels,
        ),
    log:
        f"{LOGS}/hspz_dotplot/{{batch}}/{{n}}.log",
    conda:
        "../envs/hspz.yaml"
    params:
        segments=f"{RESULTS}/{{batch}}/{{n}}",
    shell:
        "hspZ dotplot --plan {input.plan:q} --job {wildcards.n:q} --names {input.names:q}"
        " --distribution {output.distribution:q} --output {output.plot:q}"
        " {params.segments:q} > {log:q} 2>&1"
