# The batch's query list (absolute paths) and names.tsv (sheet name -> job number), written in
# the snakemake process from the rule's params (a local rule, `run:`): the sheet's text reaches
# no shell and no command line, whatever it holds or how long it is, and no Python starts.
rule hspz_query_list:
    output:
        queries=f"{WORK}/{{batch}}/queries.txt",
        names=f"{WORK}/{{batch}}/names.tsv",
    log:
        f"{LOGS}/hspz_query_list/{{batch}}.log",
    params:
        queries=query_lines,
        names=name_lines,
    run:
        write_query_list(output, params, log)


# A checkpoint: the number of work jobs is read from the plan it writes (never more workers
# than reference bins). It plans on the kind of device its work jobs get, because the memory
# preflight sizes the bins to the device it sees, and writes each work job's size (sizes.tsv:
# memory and expected runtime, `hspZ plan --sizes`), which hspz_work's resources read.
checkpoint hspz_plan:
    input:
        unpack(plan_input),
        queries=f"{WORK}/{{batch}}/queries.txt",
    output:
        plan=f"{WORK}/{{batch}}/plan.txt",
        sizes=f"{WORK}/{{batch}}/sizes.tsv",
    log:
        f"{LOGS}/hspz_plan/{{batch}}.log",
    conda:
        "../envs/hspz.yaml"
    threads: 1
    resources:
        gpu=gpus,
        mem_mb=lambda wildcards, input, attempt: capped(
            (1000 + 3 * input_mb(input)) * retry_factor(attempt), config["max_mem_mb"]
        ),
        runtime=lambda wildcards, input, attempt: capped(
            (10 + input_mb(input) / 100) * retry_factor(attempt), config["max_runtime"]
        ),
    params:
        sources=plan_sources,
        flags=plan_flags,
        workers=setting("workers"),
        backend=setting("backend"),
        threads=work_threads,
        sizes=sizes_flags,
    shell:
        "hspZ plan {params.sources:q} --query-list={input.queries:q} {params.flags:q}"
        " --gpus={params.workers} --backend={params.backend} --threads={params.threads}"
        " --sizes={output.sizes:q} {params.sizes} --output={output.plan:q} > {log:q} 2>&1"
