# One job per planned worker: its units of every query, each reference bin built or loaded
# once. Finished units are kept in units/ beside the declared output (Snakemake deletes a failed
# job's outputs), so a rerun (--rerun-incomplete) recomputes only what is missing. Locally a job
# takes the first free GPU (one lock per device); under SLURM it sees only its own. Its memory
# and time are the plan's figures for this worker (sizes.tsv) times a factor that grows with
# each attempt (`retries:` in the profiles), capped by max_mem_mb and max_runtime.
rule hspz_work:
    input:
        unpack(plan_input),
        plan=f"{WORK}/{{batch}}/plan.txt",
        sizes=f"{WORK}/{{batch}}/sizes.tsv",
    output:
        result=f"{WORK}/{{batch}}/worker{{k}}.result",
    log:
        f"{LOGS}/hspz_work/{{batch}}/{{k}}.log",
    conda:
        "../envs/hspz.yaml"
    threads: work_threads
    resources:
        gpu=gpus,
        mem_mb=work_mem_mb,
        runtime=work_runtime,
    params:
        units=f"{WORK}/{{batch}}/units",
        locks=f"{WORK}/gpu-locks",
        index=lambda wildcards, input: (
            [f"--index={input.index}"] if "index" in input.keys() else []
        ),
        backend=setting("backend"),
    shell:
        "hspZ work --plan={input.plan:q} --worker={wildcards.k} {params.index:q}"
        " --units={params.units:q} --device-lock={params.locks:q}"
        " --output={output.result:q} --backend={params.backend} --threads={threads}"
        " > {log:q} 2>&1"
