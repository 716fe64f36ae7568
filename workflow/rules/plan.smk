# A checkpoint: how many work jobs a chain has is read from the plan it writes.
checkpoint hspz_plan:
    input:
        unpack(plan_input),
    output:
        plan="results/{job}/plan.txt",
    log:
        "logs/hspz_plan/{job}.log",
    params:
        flags=run_flags,
        workers=setting("workers"),
    threads: 1
    conda:
        "../envs/hspz.yaml"
    shell:
        "hspZ plan {params.flags} --reference {input.reference} --query {input.query}"
        " --gpus {params.workers} --output {output.plan} > {log} 2>&1"
