# A checkpoint: the number of work jobs is read from the plan it writes. It plans on the kind of
# device its work jobs get, because the memory preflight sizes bins to the device it sees;
# HSPZ_LAYOUT_FORCE_WORKERS makes -B 0 lay out for W workers although it sees one GPU.
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
        backend=setting("backend"),
    threads: 1
    resources:
        gpu=gpus,
    conda:
        "../envs/hspz.yaml"
    shell:
        "HSPZ_LAYOUT_FORCE_WORKERS={params.workers} hspZ plan {params.flags}"
        " --reference {input.reference} --query {input.query} --gpus {params.workers}"
        " --backend {params.backend} --output {output.plan} > {log} 2>&1"
