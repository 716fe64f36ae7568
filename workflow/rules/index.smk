# hspZ index once per (reference, layout): every batch of that reference loads its bins.
rule hspz_index:
    input:
        reference=index_reference,
    output:
        index=directory(f"{WORK}/index/{{index}}"),
    log:
        f"{LOGS}/hspz_index/{{index}}.log",
    conda:
        "../envs/hspz.yaml"
    threads: index_threads
    resources:
        mem_mb=lambda wildcards, input, attempt: capped(
            (1000 + 12 * input_mb(input)) * retry_factor(attempt), config["max_mem_mb"]
        ),
        runtime=lambda wildcards, input, attempt: capped(
            (10 + input_mb(input) / 20) * retry_factor(attempt), config["max_runtime"]
        ),
    params:
        flags=index_flags,
        backend=index_backend,
    shell:
        "hspZ index --reference={input.reference:q} --index={output.index:q} {params.flags:q}"
        " --backend={params.backend} --threads={threads} --time > {log:q} 2>&1"
