"""hspZ: exact high-scoring segment pairs (HSPs) for whole-genome DNA alignment.

The package is laid out by layer, lowest first; a module imports only from its own package or
from packages above it in this list (`tests/test_architecture.py` holds the table):

    core      errors, options, knobs, names, scoring, jit, lean, faults, progress, durable
    io        records, fasta, twobit, readers, digests, packing (bins of records)
    stages    seed, xdrop, hsp, chunks (seed batches, chunk walks), segments, partition (-D)
    engine    contract, cpu, gpu (kernels/*.cu, cuda_source), backends (the choice)
    planning  bins, memory (the model), layout (-B 0, preflight), schedule, budget, estimate,
              seedable, joblist (the query list), inputs, pricing (a unit's projected wall)
    formats   sealed, manifest, planfile, results, frozen, index
    run       request, freeze, worker, pool, libc, emit, digest, outdir, job_entries, execute,
              summary, report, driver (the one driver: `drive`, the stage list)
    tools     compare, bench, plots, gapped
    commands  one module per command
    cli       parsing, then one call of a command

A FASTA record travels: io.readers -> io.packing (a bin) -> planning.bins (the plan) ->
planning.schedule -> engine (stages.seed, stages.xdrop, stages.hsp on each unit) -> run.emit
(stages.segments lines into OUT); `hspz.run.driver` walks it module by module.
"""

__version__ = "0.1.0"
