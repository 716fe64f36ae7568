# One job per planned worker: its units of every query, each reference bin built or loaded
# once. Finished units are kept in units/ beside the declared output (Snakemake deletes a failed
# job's outputs), so a rerun (--rerun-incomplete) recomputes only what is missing. Locally a job
# takes the first free GPU (one lock per device); under SLURM it sees only its own.
rule hspz_work:
    input:
        unpack(plan_input),
        plan=f"{WORK}/{{batch}}/plan.txt",
    output:
        result=f"{WORK}/{{batch}}/worker{{k}}.result",
    log:
        f"{LOGS}/hspz_work/{{batch}}/{{k}}.log",
    conda:
        "../envs/hspz.yaml"
    threads: setting("threads")
    resources:
        gpu=gpus,
    params:
        units=f"{WORK}/{{batch}}/units",
        locks=f"{WORK}/gpu-locks",
        index=lambda wildcards, input: (
            f"--index {input.index}" if "index" in input.keys() else ""
        ),
        backend=setting("backend"),
    shell:
        "hspZ work --plan {input.plan} --worker {wildcards.k} {params.index}"
        " --units {params.units} --device-lock {params.locks} --output {output.result}"
        " --backend {params.backend} --threads {threads} > {log} 2>&1"
