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
    params:
        flags=index_flags,
        backend=index_backend,
    shell:
        "hspZ index --reference {input.reference} --index {output.index} {params.flags}"
        " --backend {params.backend} --threads {threads} --time > {log} 2>&1"
