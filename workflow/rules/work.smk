rule hspz_work:
    input:
        plan="results/{job}/plan.txt",
    output:
        result="results/{job}/work/{k}.result",
    log:
        "logs/hspz_work/{job}/{k}.log",
    params:
        backend=setting("backend"),
        device=device_env,
    threads: setting("threads")
    resources:
        gpu=work_gpus,
    conda:
        "../envs/hspz.yaml"
    shell:
        "{params.device} hspZ work --plan {input.plan} --worker {wildcards.k}"
        " --output {output.result} --backend {params.backend} --threads {threads} > {log} 2>&1"
