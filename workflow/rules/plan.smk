# The batch's query list (absolute paths) and names.tsv (sheet name -> job number).
rule hspz_query_list:
    output:
        queries=f"{WORK}/{{batch}}/queries.txt",
        names=f"{WORK}/{{batch}}/names.tsv",
    log:
        f"{LOGS}/hspz_query_list/{{batch}}.log",
    conda:
        "../envs/hspz.yaml"
    params:
        queries=query_lines,
        names=name_lines,
    shell:
        "(printf '%s\\n' {params.queries} > {output.queries}"
        " && printf '%s\\n' {params.names} > {output.names}) > {log} 2>&1"


# A checkpoint: the number of work jobs is read from the plan it writes (never more workers
# than reference bins). It plans on the kind of device its work jobs get, because the memory
# preflight sizes the bins to the device it sees.
checkpoint hspz_plan:
    input:
        unpack(plan_input),
        queries=f"{WORK}/{{batch}}/queries.txt",
    output:
        plan=f"{WORK}/{{batch}}/plan.txt",
    log:
        f"{LOGS}/hspz_plan/{{batch}}.log",
    conda:
        "../envs/hspz.yaml"
    threads: 1
    resources:
        gpu=gpus,
    params:
        sources=plan_sources,
        flags=plan_flags,
        workers=setting("workers"),
        backend=setting("backend"),
    shell:
        "hspZ plan {params.sources} --query-list {input.queries} {params.flags}"
        " --gpus {params.workers} --backend {params.backend} --output {output.plan} > {log} 2>&1"
