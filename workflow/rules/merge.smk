# Every worker's results replayed in ordinal order into results/<batch>/: the bytes
# `hspZ run --query-list` writes (000001/, ... or archives, queries.tsv last), plus names.tsv,
# then the checksummed manifest of that folder, which `all` depends on: a job folder deleted
# or changed later sets the manifest aside when the workflow is parsed, and this job runs
# again. Before it merges, the dot plots and gapped alignments of job numbers the batch no
# longer has are removed (scripts/results_manifest.py prune).
rule hspz_merge:
    input:
        plan=f"{WORK}/{{batch}}/plan.txt",
        names=f"{WORK}/{{batch}}/names.tsv",
        results=work_results,
    output:
        queries=f"{RESULTS}/{{batch}}/queries.tsv",
        names=f"{RESULTS}/{{batch}}/names.tsv",
        ledger=f"{WORK}/{{batch}}/ledger.tsv",
        manifest=f"{WORK}/{{batch}}/results.manifest",
    log:
        f"{LOGS}/hspz_merge/{{batch}}.log",
    conda:
        "../envs/hspz.yaml"
    threads: 1
    resources:
        mem_mb=lambda wildcards, input, attempt: capped(
            (1000 + 4 * input_mb(input)) * retry_factor(attempt), config["max_mem_mb"]
        ),
        runtime=lambda wildcards, input, attempt: capped(
            (10 + input_mb(input) / 50) * retry_factor(attempt), config["max_runtime"]
        ),
    params:
        out=f"{RESULTS}/{{batch}}",
        results=results_root,
        flags=merge_flags,
        jobs=lambda wildcards: len(BATCHES[wildcards.batch][1]),
        script=MANIFEST_SCRIPT,
    shell:
        "(python {params.script:q} prune {params.results:q} {wildcards.batch} {params.jobs}"
        " && hspZ merge --plan={input.plan:q} --output={params.out:q}"
        " --ledger={output.ledger:q} {params.flags} -- {input.results:q}"
        " && cp -- {input.names:q} {output.names:q}"
        " && python {params.script:q} write {params.out:q} {output.manifest:q}) > {log:q} 2>&1"
