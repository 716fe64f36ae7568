"""hspz_query_list's script: the batch's query list (one absolute path a line) and names.tsv
(sheet name, job number, path), from the rule's params; run by Snakemake's `script:` (its
values reach no shell and no command line, whatever a sheet holds or how long it is)."""

import sys

snakemake = globals()["snakemake"]  # Snakemake's script preamble defines it
sys.path.insert(0, snakemake.scriptdir)  # the script runs from a copy under .snakemake/
from results_manifest import write_atomically  # noqa: E402

write_atomically(snakemake.output.queries, [f"{q}\n" for q in snakemake.params.queries])
write_atomically(snakemake.output.names, [f"{n}\n" for n in snakemake.params.names])
with open(snakemake.log[0], "w") as log:
    log.write(f"{len(snakemake.params.queries)} queries\n")
