# Worker k uses device k mod (visible GPUs): one GPU per job under SLURM, spread locally.
rule hspz_work:
    input:
        plan="results/{job}/plan.txt",
    output:
        result="results/{job}/work/{k}.result",
    log:
        "logs/hspz_work/{job}/{k}.log",
    params:
        backend=setting("backend"),
    threads: setting("threads")
    resources:
        gpu=gpus,
    conda:
        "../envs/hspz.yaml"
    shell:
        "hspZ work --plan {input.plan} --worker {wildcards.k} --output {output.result}"
        " --backend {params.backend} --threads {threads} > {log} 2>&1"
